"""The Train form's dataset preview (``ui.preview.preview``) for an embedding run: a sentence-
transformers model and a file of native pairs give the shape, the loss and the rows column by
column; a text model refuses the same file as before; *Train as an embedding model* with Embedding
columns reads a generation file as pairs."""

from __future__ import annotations

import json
from pathlib import Path

import huggingface_hub
import pandas as pd
import pytest

from trainer_core.runs.job import JobRunner
from trainer_core.settings import Settings
from ui.context import Context
from ui.preview import preview


@pytest.fixture
def ctx(tiny_encoder_dir: Path, tiny_model_dir: Path, datasets_dir: Path, tmp_path: Path, monkeypatch) -> Context:
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(tmp_path / "empty-cache"))
    roots = f"{tiny_encoder_dir.parent},{tiny_model_dir.parent},{datasets_dir},{tmp_path}"
    settings = Settings(data_dir=tmp_path / "data", models_dir=tmp_path / "models", allowed_paths=roots)
    return Context(runner=JobRunner(runs_dir=settings.runs_dir), settings=settings)


def _files(datasets_dir: Path, folder: Path, rows: int = 40) -> tuple[Path, Path]:
    """(native pairs: query / document, the same rows as Alpaca: instruction / input / output) of
    the Alpaca demo's first ``rows`` rows."""
    alpaca = json.loads((datasets_dir / "alpaca_en_demo.json").read_text(encoding="utf-8"))[:rows]
    pairs, generation = folder / "pairs.jsonl", folder / "alpaca.json"
    pairs.write_text("\n".join(json.dumps({"query": a["instruction"], "document": a["output"]}) for a in alpaca))
    generation.write_text(json.dumps(alpaca))
    return pairs, generation


def _shown(ctx: Context, path: Path, model: Path, **embedding) -> tuple[str, list[str]]:
    """(the summary, the table's columns) of the preview of ``path`` for ``model`` (Max seq length 64)."""
    summary, table, *_ = preview(ctx, None, str(path), "auto", "", str(model), 64, "sft", "", None, **embedding)
    shown = table if isinstance(table, pd.DataFrame) else table["value"]  # a DataFrame: a refusal's empty table
    return summary, list(shown.columns)


def test_an_embedding_model_shows_native_pairs_by_column_and_a_text_model_refuses_them(
    ctx, tiny_encoder_dir, tiny_model_dir, datasets_dir, tmp_path
):
    path, alpaca = _files(datasets_dir, tmp_path)
    summary, columns = _shown(ctx, path, tiny_encoder_dir)
    assert summary.startswith("Detected format: **embedding pairs: anchor / positive — MultipleNegativesRankingLoss**")
    assert "· **40** rows" in summary and "longer than Max seq length (64 tokens)" in summary
    assert columns == ["row", "anchor", "positive"]
    refused, empty = _shown(ctx, path, tiny_model_dir)  # a text generator: as before
    assert refused.startswith("**Cannot use this dataset:**") and "holds embedding data" in refused
    assert "not a text generator" in refused and empty == ["row", "preview"]  # the empty table
    mapped = dict(is_embedding="yes", embedding_columns="anchor=instruction, positive=output")
    said, columns = _shown(ctx, alpaca, tiny_model_dir, **mapped)  # a text model trained as an embedder
    assert "embedding pairs" in said and "**40** rows" in said and columns == ["row", "anchor", "positive"]
    as_text, columns = _shown(ctx, alpaca, tiny_model_dir)
    assert as_text.startswith("Detected format: **alpaca**") and columns == ["row", "conversation"]
