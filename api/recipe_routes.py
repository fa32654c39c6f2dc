"""Data recipes over HTTP (``/api/recipes/...``): the built-in templates and the check of a recipe
as YAML (what the page's editor sends before a run). Nothing here reads a document, a seed file or
the writer model: a recipe is checked as text only; a refusal names the recipe keys and its code."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends
from pydantic import BaseModel, Field

from api.auth import require_token
from trainer_core.recipes.library import template_names, template_text
from trainer_core.recipes.schema import DOCUMENT_COLUMNS, MAX_RECIPE_BYTES, TOPIC_COLUMNS, load_yaml, parse_recipe

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
