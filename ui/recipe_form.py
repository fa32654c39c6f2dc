"""The recipe the "Make a dataset from documents" panel runs: the YAML in its editor with the page's
fields laid over it (sources, chunk sizes, the writer model), checked as ``api.recipe_routes.check``
checks it. The fields' labels, and their defaults and bounds (from ``Chunking`` and
``InferenceParameters``: the one place of them), live here."""

from __future__ import annotations

import html
from dataclasses import dataclass
from typing import Any, Optional

from trainer_core.recipes.errors import RecipeError, SourceError
from trainer_core.recipes.schema import (
    DOCUMENT_COLUMNS,
    TOPIC_COLUMNS,
    InferenceParameters,
    Recipe,
    load_yaml,
    parse_recipe,
)
from trainer_core.recipes.sources.chunks import Chunking
from trainer_core.recipes.sources.convert import KINDS
from trainer_core.refusals import Refusal
from trainer_core.settings import Settings
from ui.refused import Refused
from ui.uploads import keep_upload, split_paths

DOCS_LABEL = "Documents (upload)"
DOC_PATHS_LABEL = "...or documents / folders on the server"
SEED_LABEL = "Seed dataset (path on the server)"
TOPICS_LABEL = "Topics (one a line)"
CHUNK_LABEL = "Chunk size (tokens)"
OVERLAP_LABEL = "Chunk overlap (tokens)"
TOKENIZER_LABEL = "Tokenizer that counts the tokens"
RECIPE_LABEL = "Recipe (YAML)"
ENDPOINT_LABEL = "Writer endpoint (base URL)"
MODEL_LABEL = "Writer model"
KEY_LABEL = "API key"
CONCURRENCY_LABEL = "Requests at once"
DOCUMENT_TYPES = [*KINDS, ".txt"]  # the upload box's file types: those the converters take

# The recipe key each page field sets, and its label (a refusal about the key names the label).
LABELS = {
    "uploads": DOCS_LABEL,
    "documents": DOC_PATHS_LABEL,
    "seed_rows": SEED_LABEL,
    "topics": TOPICS_LABEL,
    "chunk_tokens": CHUNK_LABEL,
    "overlap_tokens": OVERLAP_LABEL,
    "tokenizer": TOKENIZER_LABEL,
    "endpoint": ENDPOINT_LABEL,
    "model": MODEL_LABEL,
    "max_parallel_requests": CONCURRENCY_LABEL,
}


def bounds(model: type, name: str) -> dict[str, Any]:
    """``gr.Number`` keywords of field ``name`` of pydantic ``model``: its default, minimum, maximum."""
    field = model.model_fields[name]
    found: dict[str, Any] = {"value": field.default, "precision": 0}
    for rule in field.metadata:
        for key, kw in (("ge", "minimum"), ("le", "maximum")):
            if getattr(rule, key, None) is not None:
                found[kw] = getattr(rule, key)
    return found


CHUNK_BOUNDS = bounds(Chunking, "chunk_tokens")
OVERLAP_BOUNDS = bounds(Chunking, "overlap_tokens")
CONCURRENCY_BOUNDS = bounds(InferenceParameters, "max_parallel_requests")
BOUNDS = {"chunk_tokens": CHUNK_BOUNDS, "overlap_tokens": OVERLAP_BOUNDS, "max_parallel_requests": CONCURRENCY_BOUNDS}
TOKENIZER_DEFAULT = Chunking.model_fields["tokenizer"].default


@dataclass
class PageFields:
    """What the panel's fields say (empty: the recipe's own value stands)."""

    uploads: Any = None  # the upload box's files (a path or a list of them)
    doc_paths: str = ""
    seed_rows: str = ""
    topics: str = ""
    chunk_tokens: Any = None
    overlap_tokens: Any = None
    tokenizer: str = ""
    endpoint: str = ""
    model: str = ""
    concurrency: Any = None


def _number(value: Any, key: str) -> Optional[int]:
    if value is None or value == "":
        return None
    try:
        number = float(value)
    except (TypeError, ValueError):
        number = float("nan")
    if not number.is_integer():
        raise RecipeError(f"{LABELS[key]}: a whole number", fields=(key,))
    low, high = BOUNDS[key].get("minimum"), BOUNDS[key].get("maximum")
    if (low is not None and number < low) or (high is not None and number > high):
        within = f"from {low}" + (f" to {high}" if high is not None else "")
        raise RecipeError(f"{LABELS[key]}: {within} ({number:g} given)", fields=(key,))
    return int(number)


def documents(fields: PageFields, settings: Settings) -> list[str]:
    """The uploaded documents (kept in the uploads folder, each checked to be one this server
    received) and the paths typed in."""
    uploads = fields.uploads if isinstance(fields.uploads, list) else [fields.uploads] if fields.uploads else []
    try:
        kept = [keep_upload(str(u), settings, DOCS_LABEL) for u in uploads if u]
    except Refused as exc:
        raise SourceError(exc.message, fields=("uploads",), code=exc.code) from None
    return [k for k in kept if k] + split_paths(fields.doc_paths)


def laid_over(data: Any, fields: PageFields, settings: Settings) -> Any:
    """The recipe mapping ``data`` with the page's fields set in it (a source given on the page
    replaces the recipe's sources)."""
    if not isinstance(data, dict):
        return data
    docs = documents(fields, settings)
    topics = [t.strip() for t in (fields.topics or "").splitlines() if t.strip()]
    seed = (fields.seed_rows or "").strip()
    if docs or topics or seed:
        for key in ("documents", "seed_rows", "topics"):
            data.pop(key, None)
        data.update({k: v for k, v in (("documents", docs), ("seed_rows", seed), ("topics", topics)) if v})
    chunking = data.get("chunking") if isinstance(data.get("chunking"), dict) else {}
    for key, value in (("chunk_tokens", fields.chunk_tokens), ("overlap_tokens", fields.overlap_tokens)):
        if _number(value, key) is not None:
            chunking[key] = _number(value, key)
    if (fields.tokenizer or "").strip():
        chunking["tokenizer"] = fields.tokenizer.strip()
    data["chunking"] = chunking
    model = data.get("model") if isinstance(data.get("model"), dict) else {}
    if (fields.endpoint or "").strip():
        model["endpoint"] = fields.endpoint.strip()
    if (fields.model or "").strip():
        model["model"] = fields.model.strip()
    if _number(fields.concurrency, "max_parallel_requests") is not None:
        params = model.get("inference_parameters") if isinstance(model.get("inference_parameters"), dict) else {}
        params["max_parallel_requests"] = _number(fields.concurrency, "max_parallel_requests")
        model["inference_parameters"] = params
    data["model"] = model
    return data


def checked(recipe: Recipe) -> Recipe:
    """``recipe`` with the names its templates read checked (seed files' own columns: at the run)."""
    if recipe.documents or recipe.topics:
        recipe.check_names(list(DOCUMENT_COLUMNS if recipe.documents else TOPIC_COLUMNS))
    return recipe


def compose(text: str, fields: PageFields, settings: Settings) -> Recipe:
    """The recipe to run: ``text`` (YAML) with ``fields`` laid over it, checked. Raises a Refusal
    naming the recipe key, or the label of the page field that set it."""
    try:
        return checked(parse_recipe(laid_over(load_yaml(text or "", "recipe"), fields, settings)))
    except Refusal as exc:
        raise on_page(exc) from None


def on_page(exc: Refusal) -> Refusal:
    """``exc`` with the label of the page field it concerns in front (the recipe key stays in it)."""
    # "model" is the writer block's key as well as its model name: a finer field goes first.
    labels = [LABELS[f] for f in sorted(exc.fields, key=lambda f: f == "model") if f in LABELS]
    if not labels or str(exc).startswith(labels[0]):
        return exc
    return type(exc)(f"{labels[0]}: {exc}", fields=exc.fields, code=exc.code)


def recipe_numbers(text: str) -> tuple[Any, Any, Any]:
    """(chunk size, overlap, requests at once) that recipe ``text`` sets (a value it does not set: the
    schema's default), for the page's fields; (None, None, None) for a recipe that cannot be read."""
    try:
        recipe = parse_recipe(load_yaml(text or "", "recipe"))
    except Refusal:
        return None, None, None
    params = recipe.model.inference_parameters
    return recipe.chunking.chunk_tokens, recipe.chunking.overlap_tokens, params.max_parallel_requests


def columns_text(text: str) -> str:
    """Markdown: the recipe's columns (name and type, in order) and its output, or why it cannot be used."""
    try:
        recipe = checked(parse_recipe(load_yaml(text or "", "recipe")))
    except Refusal as exc:
        return notice(str(exc), exc.code)
    listed = ", ".join(f"`{c.name}` ({c.column_type})" for c in recipe.columns)
    return f"**Columns:** {listed}  \n**Output:** {recipe.output.format} ({', '.join(recipe.output.fields)})"


def notice(text: str, code: str = "") -> str:
    """A refusal (or a note) shown in the panel, its code as data."""
    return f'<div class="queue-note" data-code="{html.escape(code)}">{html.escape(text)}</div>'
