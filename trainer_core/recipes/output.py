"""A run's result in the data folder: ``data.jsonl`` (the dataset, in the output format the Train tab
reads), ``rows.jsonl`` (every column of the kept rows), ``dropped.jsonl`` (each dropped record and
why), ``recipe.yaml`` (as run; no key) and ``README.md``, the data card (sources, recipe, model,
counts). The folder is ``DATA_DIR/recipes/<output name>-<time>-<hex>``."""

from __future__ import annotations

import json
import secrets
import time
from pathlib import Path
from typing import Any

from trainer_core.recipes.run import RecipeResult
from trainer_core.recipes.schema import Recipe, recipe_yaml
from trainer_core.recipes.writer import shown_endpoint
from trainer_core.settings import Settings

DATA_FILE = "data.jsonl"
RESULT_FILES = (DATA_FILE, "README.md", "recipe.yaml", "report.json", "rows.jsonl", "dropped.jsonl")  # not made.jsonl
RECIPES_FOLDER = "recipes"  # under the data dir: an allowed folder, so the Train tab can read the result


def _jsonl(path: Path, rows: list[dict[str, Any]]) -> None:
    with path.open("w", encoding="utf-8") as stream:
        for row in rows:
            stream.write(json.dumps(row, ensure_ascii=False) + "\n")


def summary(recipe: Recipe, result: RecipeResult) -> dict[str, Any]:
    """The run's report: counts by gate, time, tokens, model (endpoint without credentials)."""
    return {
        "recipe": recipe.name,
        "format": recipe.output.format,
        "model": {"endpoint": shown_endpoint(recipe.model.endpoint), "model": recipe.model.model},
        **result.counts,
        "stopped": result.stopped,
        "seconds": round(result.seconds, 1),
        "requests": result.requests,
        "prompt_tokens": result.prompt_tokens,
        "completion_tokens": result.completion_tokens,
        "sources": result.seeds.sources,
    }


def data_card(recipe: Recipe, report: dict[str, Any], data_file: Path) -> str:
    """The data card (Markdown): what the rows are, where they came from, what was dropped and why."""
    sources = "\n".join(
        f"- `{s['file']}` (sha256 `{s['sha256'][:16]}…`"
        + (f", {s['chunks']} chunks)" if "chunks" in s else f", {s['rows']} rows)")
        if "file" in s
        else f"- {s['topics']} topics"
        for s in report["sources"]
    )
    dropped = "\n".join(f"| {reason} | {count} |" for reason, count in report["dropped"].items())
    return f"""# {recipe.output.name}

Made by the data recipe **{recipe.name}**{f": {recipe.description}" if recipe.description else ""}.
Format: `{recipe.output.format}` ({", ".join(f"{k} <- {v}" for k, v in recipe.output.fields.items())}).
Writer model: `{report["model"]["model"]}` at `{report["model"]["endpoint"]}`.

## Sources
{sources}

## Counts
Records asked for: {report["records"]}; made: {report["made"]}; kept: **{report["kept"]}**{f" (stopped at {report['made']} of {report['records']})" if report["stopped"] else ""}.

| dropped by | rows |
|---|---|
{dropped}

Requests: {report["requests"]}; tokens: {report["prompt_tokens"]} prompt, {report["completion_tokens"]} completion; {report["seconds"]} s.

## Use
Train on `{data_file}` (Train tab: local dataset; CLI: `python -m trainer_core train --dataset {data_file}`;
preference rows train with a DPO / ORPO run, embedding pairs an embedding model).
The recipe as run is `recipe.yaml` beside this card; dropped records and why are in `dropped.jsonl`.
"""


def result_folder(recipe: Recipe, settings: Settings) -> Path:
    """A new result folder's path (not made): ``DATA_DIR/recipes/<output name>-<time>-<hex>``."""
    stamp = f"{time.strftime('%Y%m%d-%H%M%S')}-{secrets.token_hex(3)}"
    return Path(settings.data_dir) / RECIPES_FOLDER / f"{recipe.output.name}-{stamp}"


def write_result(recipe: Recipe, result: RecipeResult, settings: Settings, folder: Path | None = None) -> Path:
    """Write the run's files into ``folder`` (a task's folder, which may hold what it appended as
    it ran; its ``data.jsonl`` is rewritten) or a new folder under the data dir; returns it."""
    folder = Path(folder) if folder is not None else result_folder(recipe, settings)
    folder.mkdir(parents=True, exist_ok=True)
    _jsonl(folder / DATA_FILE, [r.output for r in result.kept if r.output is not None])
    _jsonl(folder / "rows.jsonl", [{"record": r.index, **r.row} for r in result.kept])
    _jsonl(
        folder / "dropped.jsonl", [{"record": r.index, "reason": r.reason, "detail": r.detail} for r in result.dropped]
    )
    (folder / "recipe.yaml").write_text(recipe_yaml(recipe), encoding="utf-8")
    report = summary(recipe, result)
    (folder / "report.json").write_text(json.dumps(report, indent=1), encoding="utf-8")
    (folder / "README.md").write_text(data_card(recipe, report, (folder / DATA_FILE).resolve()), encoding="utf-8")
    return folder
