"""A recipe run as a background task (``TaskRunner``, kind ``recipe``): it takes the machine as an
export does (refused while training or another task runs; a Start is refused while it runs), shows
progress, and Stop keeps what was made (``TaskRunner.cancel``; ``task_worker``). Used by the HTTP
API and the Data recipes page.

``start_recipe_task`` checks what it can before a worker is spent: the recipe, the writer
endpoint (this machine only unless the server allows others), every document and seed file
through the path check, the key, and for a resume the earlier result folder (inside
``DATA_DIR/recipes``, its recipe the same but for ``model``). Refusals are ``TaskRefused``
(400 bad input, 404 an unknown resume, 409 busy) with the recipe key in ``fields``.

The key: the ``api_key`` argument only (never stored, logged or returned). A recipe naming
``api_key_env: STUDIO_API_TOKEN`` with an endpoint on this machine gets the studio's own token
(its own ``/v1``); the server reads no other environment variable for a recipe."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Optional

from pydantic import SecretStr

from trainer_core.paths import PathNotAllowed, confine
from trainer_core.recipes.errors import RecipeError
from trainer_core.recipes.output import RECIPES_FOLDER, result_folder
from trainer_core.recipes.schema import Recipe, load_yaml, parse_recipe
from trainer_core.recipes.sources.convert import document_files
from trainer_core.recipes.writer import check_endpoint, on_this_machine
from trainer_core.serving.schemas import ModelChoice
from trainer_core.settings import Settings
from trainer_core.tasks.runner import TaskRefused, TaskRunner
from trainer_core.tasks.schemas import TaskKind, TaskRecord

STUDIO_KEY_VARIABLE = "STUDIO_API_TOKEN"  # the studio's own token: the only variable a server run reads


def task_key(recipe: Recipe, api_key: Optional[SecretStr], settings: Settings) -> Optional[SecretStr]:
    """The key a server-side run sends (see the module docstring). Raises RecipeError for a recipe
    that names another environment variable and no key was given."""
    if api_key is not None and api_key.get_secret_value():
        return api_key
    name = recipe.model.api_key_env
    if not name:
        return None
    if name == STUDIO_KEY_VARIABLE and on_this_machine(recipe.model.endpoint):
        return settings.api_token
    raise RecipeError(
        f"model.api_key_env: the server reads no environment variable for a recipe's key ({name[:80]}); "
        "send the key in the api_key field, or leave api_key_env out for an endpoint without one",
        fields=("api_key_env", "api_key"),
    )


def _check_sources(recipe: Recipe, settings: Settings) -> None:
    """Each document and the seed file through the path check (nothing is read)."""
    if recipe.documents:
        document_files(recipe.documents, settings.allowed_roots)
    if recipe.seed_rows:
        path = confine(recipe.seed_rows, settings.allowed_roots, "seed_rows")
        if not path.is_file():
            raise RecipeError(f"seed_rows: '{path.name}' does not exist", fields=("seed_rows",))


def folder_in_recipes(settings: Settings, name: str, field: str = "resume") -> Path:
    """The result folder ``name`` (a folder's name, or its path) in ``DATA_DIR/recipes``, through the
    path check (a link out of it is refused). Raises RecipeError / PathNotAllowed naming ``field``."""
    recipes = (Path(settings.data_dir) / RECIPES_FOLDER).resolve()
    if not name or name in (".", ".."):
        raise RecipeError(f"{field}: name a result folder in {RECIPES_FOLDER}/", fields=(field,))
    folder = confine(recipes / name if Path(name).name == name else name, [recipes], field)
    if not (folder / "recipe.yaml").is_file():
        raise RecipeError(f"{field}: no recipe result folder '{folder.name}'", fields=(field,), code="not_found")
    return folder


def named_folder(tasks: TaskRunner, name: str, field: str = "resume") -> Path:
    """The result folder ``name`` names: a recipe task id, or as ``folder_in_recipes`` takes it.
    Raises TaskRefused naming ``field`` (404 unknown, 400 outside the recipes folder)."""
    record = tasks.get(name) if name else None
    if record is not None and record.kind == TaskKind.recipe and record.output_dir:
        name = record.output_dir
    try:
        return folder_in_recipes(tasks.settings, name, field)
    except (RecipeError, PathNotAllowed) as exc:
        status = 404 if exc.code == "not_found" else 400
        raise TaskRefused(str(exc), status, code=exc.code, fields=(field,)) from None


def same_recipe(recipe: Recipe, folder: Path) -> None:
    """RecipeError unless ``recipe`` is the folder's recipe but for ``model`` (the records are
    numbered by it: a resume with other sources or columns would mix two datasets)."""
    earlier = parse_recipe(load_yaml((folder / "recipe.yaml").read_text(encoding="utf-8"), "recipe.yaml"))
    if earlier.model_dump(exclude={"model"}) != recipe.model_dump(exclude={"model"}):
        raise RecipeError(
            f"resume: the recipe differs from the one {folder.name} was made with (only model may change); "
            "leave the recipe empty to resume with the folder's own",
            fields=("resume",),
        )


def _choice(recipe: Recipe) -> ModelChoice:
    """The task's model: the writer model (no run)."""
    name = recipe.model.model[:200]
    return ModelChoice(id=name, label=f"writer {name}", kind="base", base_model=name)


def start_recipe_task(
    tasks: TaskRunner, recipe_text: str, api_key: Optional[SecretStr] = None, resume: Optional[str] = None
) -> TaskRecord:
    """Start running the recipe ``recipe_text`` (YAML) into a new result folder, or continue the
    stopped or failed run ``resume`` (a recipe task id or its result folder's name) in its folder
    (``recipe_text`` empty: the folder's own recipe). Returns the running task's record; its
    result (``task_worker.run_recipe_task``) names the folder, the data file and the counts.
    Raises TaskRefused (see the module docstring)."""
    from trainer_core.recipes.task_worker import run_recipe_task

    settings = tasks.settings
    folder = named_folder(tasks, resume) if resume else None
    try:
        if folder is not None and not (recipe_text or "").strip():
            recipe_text = (folder / "recipe.yaml").read_text(encoding="utf-8")
        recipe = parse_recipe(load_yaml(recipe_text or "", "recipe"))
        if folder is not None:
            same_recipe(recipe, folder)
        check_endpoint(recipe.model.endpoint, settings.allow_remote_recipe_models)
        key = task_key(recipe, api_key, settings)
        _check_sources(recipe, settings)
    except (RecipeError, PathNotAllowed) as exc:
        raise TaskRefused(str(exc), 400, code=exc.code, fields=exc.fields) from None
    folder = folder or result_folder(recipe, settings)
    public: dict[str, Any] = {"recipe": recipe.name, "format": recipe.output.format, "resume": resume or None}
    private = {**public, "recipe_yaml": recipe_text, "api_key": key.get_secret_value() if key is not None else None}
    context = {"settings": settings, "folder": str(folder)}
    return tasks.start(
        TaskKind.recipe,
        _choice(recipe),
        private,
        run_recipe_task,
        context=context,
        public_request=public,
        output_dir=folder,
    )
