"""An embedding run's GGUF export, converted by llama.cpp's converter and checked in llama.cpp
(``kinds.embedding.gguf``): the tiny BERT-style encoder (mean pooling read from its folder) at f16
and q8_0, and the tiny SmolLM2 as a last-token embedder (the pooling type written by the converter's boot);
the vectors llama.cpp makes against the run's. Each starts the converter and llama.cpp's probe."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.trainer_core.kinds.embedding.test_export import make_run, run_export
from trainer_core.export.worker import ExportError
from trainer_core.llamacpp import build as tools
from trainer_core.settings import get_settings


def _llama_cpp() -> Path:
    folder = get_settings().llama_cpp_dir
    problem = tools.missing_message(folder)
    if problem:  # .ci/run fails before the tests when it is missing (scripts/setup.sh builds it)
        pytest.skip(problem)
    return folder


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_the_tiny_encoders_f16_and_q8_0_embed_in_llama_cpp_as_the_run_does(tiny_encoder_dir, tmp_path):
    _llama_cpp()
    run = make_run(tiny_encoder_dir, tmp_path / "job_emb")
    result, messages = run_export(run, tiny_encoder_dir, "gguf-f16", tmp_path / "out", gguf_types=["q8_0"])
    f16, q8 = result.gguf
    assert result.passed and (f16.type, f16.file_type, q8.type, q8.file_type) == (
        "f16",
        "MOSTLY_F16",
        "q8_0",
        "MOSTLY_Q8_0",
    )
    assert f16.check.checked_by == "llama.cpp" and f16.check.cosine_min >= 0.99 and q8.check.cosine_min >= 0.98
    assert not f16.check.problems and not q8.check.problems  # llama.cpp pools them by mean (1), as the folder says
    assert not (tmp_path / "out" / ".merged").exists()
    card = (tmp_path / "out" / "README.md").read_text()
    assert q8.check.summary.startswith("q8_0 in llama.cpp: 4/4 sentences, lowest cosine 0.9")
    assert f"`{q8.name}` (q8_0, " in card and q8.check.summary in card
    assert "llama-server -m job_emb-f16.gguf --embedding" in card
    assert "Quantising to q8_0 with llama.cpp" in messages and "Embedding the check in llama.cpp: q8_0" in messages


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_a_decoder_embedder_gets_last_token_pooling_in_its_gguf(tiny_embedder_dir, tmp_path):
    _llama_cpp()
    base = tiny_embedder_dir
    run = make_run(base, tmp_path / "job_emb")
    result, _ = run_export(run, base, "gguf-f16", tmp_path / "out")
    (f16,) = result.gguf
    assert result.passed and f16.check.cosine_min >= 0.99, f16.check
    assert not f16.check.problems  # llama.cpp pools it by type 3, the last token


def test_gguf_without_llama_cpp_is_refused_before_converting(tiny_encoder_dir, tmp_path, monkeypatch):
    run = make_run(tiny_encoder_dir, tmp_path / "job_emb")
    monkeypatch.setattr(tools, "missing_message", lambda folder: "llama.cpp is not built: run setup")
    with pytest.raises(ExportError, match="checked in llama.cpp: llama.cpp is not built") as error:
        run_export(run, tiny_encoder_dir, "gguf-f16", tmp_path / "out")
    assert error.value.kind == "input" and not list((tmp_path / "out").iterdir())
