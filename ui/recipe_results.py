"""The recipe panel's results: the folders in ``DATA_DIR/recipes`` with their counts, a result's
data card, its dataset file to download, and *Use this dataset*, which puts that file (and its
format) into the Train form. A result is named by its folder's name only; anything else, or a
name outside that folder, is refused naming the "Result" box."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Optional

import gradio as gr
import pandas as pd
from pydantic import SecretStr, ValidationError

from trainer_core.paths import PathNotAllowed, confine
from trainer_core.recipes.output import DATA_FILE, RECIPES_FOLDER
from trainer_core.recipes.push_request import DatasetPushRequest
from trainer_core.recipes.results import describe, list_results
from trainer_core.refusals import Refusal, explain
from trainer_core.settings import Settings
from trainer_core.tasks.runner import TaskRunner
from trainer_core.tasks.schemas import TaskPhase
from ui.recipe_form import notice
from ui.task_progress import follow, status_line

RESULT_LABEL = "Result"
PUSH_LABELS = {"repo_id": "Hub dataset repository", "private": "Private", "token": "Hub token"}
COLUMNS = ["result", "format", "kept", "made", "dropped", "stopped"]
CARD_CHARS = 20_000
# The Train form's fields a result's format sets (format_type, training_method, is_embedding).
USE_AS: dict[str, dict[str, str]] = {
    "alpaca": {"format_type": "alpaca", "training_method": "sft"},
    "messages": {"format_type": "messages", "training_method": "sft"},
    "preference": {"format_type": "preference", "training_method": "dpo"},
    "embedding_pairs": {"format_type": "auto", "training_method": "sft", "is_embedding": "yes"},
}
USE_FIELDS = ("format_type", "training_method", "is_embedding")


class NoResult(ValueError):
    """A result name that is not a folder in ``DATA_DIR/recipes``."""


def folder_of(settings: Settings) -> Path:
    """``DATA_DIR/recipes``."""
    return Path(settings.data_dir) / RECIPES_FOLDER


def results_table(found: list[dict[str, Any]]) -> pd.DataFrame:
    """One row per result (``recipes.results.list_results``): its format and counts."""
    rows = []
    for result in found:
        counts = result["counts"]
        state = ("yes" if result["stopped"] else "no") if result["finished"] else "unfinished"
        dropped = sum(v for v in counts["dropped"].values() if isinstance(v, int))
        rows.append([result["name"], result["format"] or "", counts["kept"], counts["made"], dropped, state])
    return pd.DataFrame(rows, columns=COLUMNS)


def result_folder(name: Optional[str], settings: Settings) -> Path:
    """The result folder named ``name``; raises NoResult naming the Result box."""
    name = (name or "").strip()
    if not name:
        raise NoResult(f"{RESULT_LABEL}: choose a result first")
    if Path(name).name != name or name in (".", ".."):
        raise NoResult(f"{RESULT_LABEL}: '{name[:80]}' is not a result's name")
    try:
        folder = confine(str(folder_of(settings) / name), [folder_of(settings)], RESULT_LABEL)
    except PathNotAllowed:
        raise NoResult(f"{RESULT_LABEL}: '{name[:80]}' is not in {RECIPES_FOLDER}/") from None
    if not (folder / DATA_FILE).is_file() or not (folder / "recipe.yaml").is_file():
        raise NoResult(f"{RESULT_LABEL}: no result '{name[:80]}'")
    return folder


def refresh(settings: Settings, chosen: Optional[str] = None) -> tuple[dict[str, Any], dict[str, Any]]:
    """(table, result choice) read now; the choice keeps ``chosen`` while it exists, else the newest."""
    found = list_results(settings)
    names = [r["name"] for r in found]
    value = chosen if chosen in names else (names[0] if names else None)
    return gr.update(value=results_table(found)), gr.update(choices=names, value=value)


def card(settings: Settings, name: Optional[str]) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    """(data card, dataset file to download, notice) of result ``name``."""
    if not (name or "").strip():
        return gr.update(value=""), gr.update(value=None), gr.update(value="")
    try:
        folder = result_folder(name, settings)
    except NoResult as exc:
        return gr.update(value=""), gr.update(value=None), gr.update(value=notice(str(exc), "not_found"))
    try:
        text = (folder / "README.md").read_text(encoding="utf-8")[:CARD_CHARS]
    except OSError:
        text = f"*{folder.name}: no data card yet (the run has not ended).*"
    return gr.update(value=text), gr.update(value=download_copy(folder)), gr.update(value="")


def download_copy(folder: Path) -> str:
    """A copy of the result's dataset file in the temp folder (Gradio serves files from there),
    named ``<result>-data.jsonl``."""
    target = Path(tempfile.gettempdir()) / "studio-recipes" / folder.name / f"{folder.name}-{DATA_FILE}"
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(folder / DATA_FILE, target)
    return str(target)


def use(settings: Settings, name: Optional[str]) -> tuple[dict[str, Any], ...]:
    """*Use this dataset*: (upload box, paths box, format_type, training_method, is_embedding,
    notice): the result's dataset file as the training data, its format set."""
    try:
        folder = result_folder(name, settings)
    except NoResult as exc:
        return (
            gr.update(),
            gr.update(),
            *(gr.update() for _ in USE_FIELDS),
            gr.update(value=notice(str(exc), "not_found")),
        )
    fmt = describe(folder)["format"] or _format_of(folder)
    sets = USE_AS.get(fmt, {"format_type": "auto"})
    said = f"The Train form now trains on {folder.name}/{DATA_FILE} ({fmt or 'format detected'}); Check or Start."
    return (
        gr.update(value=None),
        gr.update(value=str((folder / DATA_FILE).resolve())),
        *(gr.update(value=sets[f]) if f in sets else gr.update() for f in USE_FIELDS),
        gr.update(value=notice(said)),
    )


def _format_of(folder: Path) -> str:
    """The output format in the folder's ``recipe.yaml`` ('' when it cannot be read)."""
    try:
        import yaml

        data = yaml.safe_load((folder / "recipe.yaml").read_text(encoding="utf-8"))
        return str(data["output"]["format"])
    except (OSError, ValueError, KeyError, TypeError, yaml.YAMLError):
        return ""


def push(tasks: TaskRunner, name: Optional[str], repo_id: str, private: bool, token: str) -> Iterator[str]:
    """*Push*: the chosen result to a Hub dataset repo as a push task, followed (status lines,
    then the repo's address). Refusals name the box (``PUSH_LABELS``); the token goes to the push
    worker only and is never in a line shown."""
    from trainer_core.recipes.hub_push import start_dataset_push

    try:
        folder = result_folder(name, tasks.settings)
        body = DatasetPushRequest(
            result=folder.name,
            repo_id=(repo_id or "").strip(),
            private=bool(private),
            token=SecretStr(token.strip()) if (token or "").strip() else None,
        )
        record = start_dataset_push(tasks, body.result, body.repo_id, body.token, body.private)
    except NoResult as exc:
        yield notice(str(exc), "not_found")
        return
    except ValidationError as exc:
        yield notice(_labelled(explain(exc)), "invalid_setting")
        return
    except Refusal as exc:
        yield notice(_labelled(str(exc)), exc.code)
        return
    for current in follow(tasks, record.task_id):
        text = status_line(current)
        if current.phase == TaskPhase.completed and current.result and current.result.get("url"):
            text += f"\n\nPushed to [{current.result['url']}]({current.result['url']})"
        yield text


def _labelled(message: str) -> str:
    """``message`` with the push request's field names as the page's labels."""
    for field, label in PUSH_LABELS.items():
        message = message.replace(f"{field}:", f"{label}:")
    return message
