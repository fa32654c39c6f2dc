"""The built-in recipe templates (``templates/*.yaml``): their names, their text, parsed recipes."""

from __future__ import annotations

from pathlib import Path

from trainer_core.recipes.errors import RecipeError
from trainer_core.recipes.schema import Recipe, read_recipe

FOLDER = Path(__file__).resolve().parent / "templates"


def template_names() -> list[str]:
    """The built-in templates, sorted."""
    return sorted(p.stem for p in FOLDER.glob("*.yaml"))


def template_text(name: str) -> str:
    """The YAML of template ``name`` (comments kept). Raises RecipeError for an unknown name."""
    if name not in template_names():
        raise RecipeError(
            f"template: '{name[:60]}' is not a built-in recipe ({', '.join(template_names())})", fields=("template",)
        )
    return (FOLDER / f"{name}.yaml").read_text(encoding="utf-8")


def template_recipe(name: str) -> Recipe:
    """Template ``name`` parsed (its placeholder sources relative to the templates folder)."""
    template_text(name)
    return read_recipe(FOLDER / f"{name}.yaml")
