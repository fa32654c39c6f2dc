"""The recipe task's worker process: ``run_recipe_task(request, context, events, stop)`` (the
``TaskRunner`` target). It makes the records into the task's result folder as they come
(``journal``), sends progress ("12 / 40 rows, 3 dropped (grounding 2, schema 1)"), and at the end,
or when Stop is set, writes the dataset and its data card (``output.write_result``) and sends the
result. A resumed run reads the records already in the folder and skips them; its counts, time and
tokens cover both parts. The key (``request["api_key"]``) goes to the writer only."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any, Optional

from pydantic import SecretStr

from trainer_core.recipes.errors import RecipeError
from trainer_core.recipes.journal import Journal, read_made
from trainer_core.recipes.output import DATA_FILE, RESULT_FILES, summary, write_result
from trainer_core.recipes.run import Progress, RecipeResult, run_recipe
from trainer_core.recipes.schema import Recipe, load_yaml, parse_recipe, recipe_yaml
from trainer_core.settings import Settings
from trainer_core.tasks.schemas import TaskEvent

log = logging.getLogger(__name__)
PARTS = ("seconds", "requests", "prompt_tokens", "completion_tokens")  # summed over a run's parts


def progress_message(done: int, total: int, dropped: dict[str, int]) -> str:
    """``12 / 40 rows, 3 dropped (grounding 2, schema 1)``."""
    count = sum(dropped.values())
    why = ", ".join(f"{reason} {n}" for reason, n in sorted(dropped.items(), key=lambda kv: -kv[1]) if n)
    return f"{done} / {total} rows, {count} dropped" + (f" ({why})" if why else "")


def _earlier_parts(folder: Path) -> dict[str, float]:
    """Time, requests and tokens of the run's earlier parts (its last report; 0 when none)."""
    try:
        report = json.loads((folder / "report.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return {k: report.get(k, 0) for k in PARTS if isinstance(report.get(k, 0), (int, float))}


def task_result(folder: Path, report: dict[str, Any]) -> dict[str, Any]:
    """The task's result: the folder, its data file, the format, the counts, the report and the
    files (downloadable through the task routes, as an export's are)."""
    files = [{"name": n, "size_bytes": (folder / n).stat().st_size} for n in RESULT_FILES if (folder / n).is_file()]
    return {
        "files": files,
        "output_dir": str(folder),
        "name": folder.name,
        "data_file": str(folder / DATA_FILE),
        "format": report["format"],
        "counts": {k: report[k] for k in ("records", "made", "kept", "dropped")},
        "stopped": report["stopped"],
        **{k: report[k] for k in ("recipe", "model", "sources", *PARTS)},
    }


def make_into(
    recipe: Recipe,
    api_key: Optional[SecretStr],
    settings: Settings,
    folder: Path,
    stop: Any,
    progress: Optional[Progress] = None,
) -> dict[str, Any]:
    """Run ``recipe`` into ``folder`` (new, or a stopped run's: its records are skipped); returns
    the run's report (``output.summary``, all parts counted). Raises RecipeError."""
    folder.mkdir(parents=True, exist_ok=True)
    made_before, earlier = read_made(folder), _earlier_parts(folder)
    (folder / "recipe.yaml").write_text(recipe_yaml(recipe), encoding="utf-8")
    if not made_before:
        (folder / DATA_FILE).write_text("", encoding="utf-8")
    journal = Journal(folder, DATA_FILE)
    try:
        result: RecipeResult = run_recipe(
            recipe,
            settings,
            api_key,
            progress=progress,
            stop=stop,
            on_record=journal.append,
            made_before=tuple(made_before),
        )
    finally:
        journal.close()
    for name in PARTS:
        setattr(result, name, getattr(result, name) + earlier.get(name, 0))
    write_result(recipe, result, settings, folder)
    return summary(recipe, result)


def _task_run(request: dict[str, Any], context: dict[str, Any], events: Any, stop: Any) -> dict[str, Any]:
    """The task's run: the recipe and key of ``request`` into ``context["folder"]``; its result."""
    recipe = parse_recipe(load_yaml(request["recipe_yaml"], "recipe"))
    key = SecretStr(request["api_key"]) if request.get("api_key") else None

    def progress(done: int, total: int, dropped: dict[str, int]) -> None:
        fraction = done / total if total else 1.0
        events.put((TaskEvent.PROGRESS, {"fraction": fraction, "message": progress_message(done, total, dropped)}))

    folder = Path(context["folder"])
    return task_result(folder, make_into(recipe, key, context["settings"], folder, stop, progress))


def run_recipe_task(request: dict[str, Any], context: dict[str, Any], events: Any, stop: Any) -> None:
    """Process entry point. Never raises; one ``result`` or ``error`` event. The records made
    before an error stay in the folder (a resume continues them)."""
    from trainer_core.process.parent import exit_with_parent

    exit_with_parent()
    key = request.get("api_key") or ""
    try:
        events.put((TaskEvent.RESULT, _task_run(request, context, events, stop)))
    except RecipeError as exc:
        events.put((TaskEvent.ERROR, {"message": str(exc), "kind": "input"}))
    except BaseException as exc:  # noqa: BLE001 - the process boundary; the key is redacted
        message = f"the recipe run failed: {type(exc).__name__}: {exc}"
        message = message.replace(key, "***") if key else message
        log.error("%s", message)
        events.put((TaskEvent.ERROR, {"message": message, "kind": "internal"}))
