"""A recipe's preview: its first records made and shown (each output row, or the gate that dropped
it and why), its counts, and the full run's records, seconds and tokens scaled from them. Nothing
is written. The CLI's ``--preview N`` and ``POST /api/recipes/preview`` answer with this."""

from __future__ import annotations

from typing import Any, Optional

from pydantic import SecretStr

from trainer_core.recipes.output import summary
from trainer_core.recipes.run import RecipeResult, full_run_estimate, run_recipe
from trainer_core.recipes.schema import Recipe
from trainer_core.settings import Settings

PREVIEW_RECORDS = 5  # what the page and the API preview


def shown_records(result: RecipeResult) -> list[dict[str, Any]]:
    """Each record in order: ``{record, row}`` (kept) or ``{record, dropped, why}``."""
    return [
        {"record": r.index, "row": r.output}
        if r.output and not r.reason
        else {"record": r.index, "dropped": r.reason, "why": r.detail}
        for r in sorted([*result.kept, *result.dropped], key=lambda r: r.index)
    ]


def preview_report(recipe: Recipe, result: RecipeResult) -> dict[str, Any]:
    """The preview's counts (``output.summary``) and the full run's estimate."""
    return {"preview": summary(recipe, result), "full_run_estimate": full_run_estimate(recipe, result)}


def preview_recipe(
    recipe: Recipe, settings: Settings, api_key: Optional[SecretStr], records: int = PREVIEW_RECORDS
) -> dict[str, Any]:
    """Make the first ``records`` records; ``{records: shown_records, preview, full_run_estimate}``.
    Raises RecipeError as ``run.run_recipe`` does."""
    result = run_recipe(recipe, settings, api_key, preview=records)
    return {"records": shown_records(result), **preview_report(recipe, result)}
