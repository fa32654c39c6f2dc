"""Data recipes over HTTP (``/api/recipes/...``): the built-in templates, the check of a recipe as
YAML (text only: no document, seed file or model is read), a preview of its first records, a run as
a task (``recipes.task``; its status and Stop are the task routes'), the result folders, and a
result's push to the Hub as a dataset. A refusal names the recipe keys and its code; a key or token
sent is never stored, logged or returned."""

from __future__ import annotations

from typing import Any, Optional

from fastapi import APIRouter, Depends, Request
from pydantic import BaseModel, ConfigDict, Field, SecretStr

from api.auth import require_token
from trainer_core.recipes.library import template_names, template_text
from trainer_core.recipes.push_request import DatasetPushRequest
from trainer_core.recipes.schema import DOCUMENT_COLUMNS, MAX_RECIPE_BYTES, TOPIC_COLUMNS, load_yaml, parse_recipe
from trainer_core.tasks.runner import TaskRunner
from trainer_core.tasks.schemas import TaskRecord

router = APIRouter(prefix="/api/recipes", tags=["data recipes"], dependencies=[Depends(require_token)])


class Template(BaseModel):
    """A built-in recipe: its name, what it makes and its YAML (comments kept)."""

    name: str
    description: str
    yaml: str


class RecipeText(BaseModel):
    """A recipe as YAML text."""

    yaml: str = Field(max_length=MAX_RECIPE_BYTES, description="The recipe, as a recipe YAML file holds it.")


class CheckedRecipe(BaseModel):
    """A recipe that parses: its name, columns (name and type, in order), output format and source."""

    name: str
    source: str
    columns: list[dict[str, str]]
    output_format: str


@router.get("/templates", response_model=list[Template])
def templates() -> list[Template]:
    """The built-in recipes users start from."""
    found = []
    for name in template_names():
        text = template_text(name)
        found.append(Template(name=name, description=load_yaml(text, name)["description"], yaml=text))
    return found


@router.post("/check", response_model=CheckedRecipe, responses={400: {"description": "A recipe that cannot be used"}})
def check(body: RecipeText) -> Any:
    """Check a recipe: YAML, keys and values, columns and the names their templates read (seed
    rows' own columns are known only when the file is read, at the run)."""
    recipe = parse_recipe(load_yaml(body.yaml, "recipe"))
    source = "documents" if recipe.documents else "seed_rows" if recipe.seed_rows else "topics"
    if source != "seed_rows":
        recipe.check_names(list(DOCUMENT_COLUMNS if recipe.documents else TOPIC_COLUMNS))
    return CheckedRecipe(
        name=recipe.name,
        source=source,
        columns=[{"name": c.name, "column_type": c.column_type} for c in recipe.columns],
        output_format=recipe.output.format,
    )


# ----- runs: a recipe run is a task (status and Stop: GET / DELETE /api/train/tasks/{task_id}) -----
REFUSED = {
    400: {"description": "A recipe, source, endpoint or folder that cannot be used"},
    404: {"description": "No such result folder"},
    409: {"description": "A training job or another task is running"},
}


class RunBody(BaseModel):
    """Run a recipe as a task. The key is used for this run only: never stored, logged or returned."""

    model_config = ConfigDict(extra="forbid")
    yaml: str = Field("", max_length=MAX_RECIPE_BYTES, description="The recipe (empty with resume: the folder's own).")
    api_key: Optional[SecretStr] = Field(
        None, max_length=1000, description="The writer endpoint's key, if it needs one."
    )
    resume: Optional[str] = Field(
        None, max_length=200, description="Continue this stopped or failed run: its task id or result folder's name."
    )


class PreviewBody(BaseModel):
    """Preview a recipe: its first records, nothing written."""

    model_config = ConfigDict(extra="forbid")
    yaml: str = Field(max_length=MAX_RECIPE_BYTES, description="The recipe, as a recipe YAML file holds it.")
    api_key: Optional[SecretStr] = Field(
        None, max_length=1000, description="The writer endpoint's key, if it needs one."
    )


def _tasks(request: Request) -> TaskRunner:
    return request.app.state.tasks


@router.post("/run", response_model=TaskRecord, responses=REFUSED)
def run(body: RunBody, tasks: TaskRunner = Depends(_tasks)) -> TaskRecord:
    """Start a recipe run (or resume one) as a task; follow it with ``GET /api/train/tasks/{task_id}``
    (progress: rows done / total and the drops by gate), stop it with ``DELETE`` there (what was
    made is kept). The result names the folder, its ``data.jsonl``, the format and the counts."""
    from trainer_core.recipes.task import start_recipe_task

    return start_recipe_task(tasks, body.yaml, body.api_key, body.resume)


@router.post("/preview", responses=REFUSED)
def preview(body: PreviewBody, tasks: TaskRunner = Depends(_tasks)) -> dict[str, Any]:
    """Make the recipe's first 5 records and answer with them (each row, or the gate that dropped
    it), their counts and the full run's estimate; nothing is written. Answered in the request (a
    short look the editor waits for), refused while training or a task runs."""
    from trainer_core.recipes.preview import preview_recipe
    from trainer_core.recipes.task import task_key

    recipe = parse_recipe(load_yaml(body.yaml, "recipe"))
    key = task_key(recipe, body.api_key, tasks.settings)
    tasks.check_idle()
    return preview_recipe(recipe, tasks.settings, key)


@router.get("/results")
def results(tasks: TaskRunner = Depends(_tasks)) -> list[dict[str, Any]]:
    """The result folders in the data folder's ``recipes/``, newest first, with their counts
    (``finished`` false: the run was killed or failed; resume it)."""
    from trainer_core.recipes.results import list_results

    return list_results(tasks.settings)


@router.post("/push", response_model=TaskRecord, responses=REFUSED)
def push(body: DatasetPushRequest, tasks: TaskRunner = Depends(_tasks)) -> TaskRecord:
    """Push a finished (or stopped) result folder to the Hugging Face Hub as a dataset repo
    (private by default), as a task."""
    from trainer_core.recipes.hub_push import start_dataset_push

    return start_dataset_push(tasks, body.result, body.repo_id, body.token, body.private)
