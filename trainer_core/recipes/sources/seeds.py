"""The seed rows a recipe's records start from: document chunks (``source``, ``chunk_index``,
``chunk``), the rows of a JSON / JSONL dataset, or topics (``topic``); each file through the
studio's path check."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from trainer_core.data.preview_tokenizer import load_preview_tokenizer
from trainer_core.paths import confine
from trainer_core.recipes.errors import RecipeError, SourceError
from trainer_core.recipes.schema import DOCUMENT_COLUMNS, TOPIC_COLUMNS, Recipe
from trainer_core.recipes.sources.chunks import chunk_text
from trainer_core.recipes.sources.convert import document_files, document_text
from trainer_core.settings import Settings

MAX_SEED_BYTES = 512 * 2**20


@dataclass
class Seeds:
    """Seed rows, the names of their columns and what they came from (for the data card)."""

    rows: list[dict[str, Any]]
    columns: list[str]
    sources: list[dict[str, Any]] = field(default_factory=list)


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as stream:
        for block in iter(lambda: stream.read(2**20), b""):
            digest.update(block)
    return digest.hexdigest()


def document_seeds(recipe: Recipe, settings: Settings) -> Seeds:
    """One seed row per chunk of each document."""
    tokenizer = load_preview_tokenizer(recipe.chunking.tokenizer, settings)
    if tokenizer is None:
        raise RecipeError(
            f"chunking.tokenizer: '{recipe.chunking.tokenizer[:120]}' is not on this machine (nothing is downloaded "
            "here); name a model folder or a model in the Hugging Face cache",
            fields=("tokenizer",),
        )
    rows, sources = [], []
    for path in document_files(recipe.documents, settings.allowed_roots):
        text = document_text(path)
        chunks = chunk_text(text, tokenizer, recipe.chunking.chunk_tokens, recipe.chunking.overlap_tokens)
        rows += [{"source": path.name, "chunk_index": i, "chunk": chunk} for i, chunk in enumerate(chunks)]
        sources.append({"file": path.name, "sha256": _sha256(path), "chars": len(text), "chunks": len(chunks)})
    return Seeds(rows, list(DOCUMENT_COLUMNS), sources)


def dataset_seeds(name: str, settings: Settings) -> Seeds:
    """The rows of a JSON (a list of objects) or JSONL file."""
    path = confine(name, settings.allowed_roots, "seed_rows")
    if not path.is_file():
        raise SourceError(f"seed_rows: '{path.name}' does not exist", fields=("seed_rows",), code="missing_files")
    if path.stat().st_size > MAX_SEED_BYTES:
        raise SourceError(
            f"seed_rows: '{path.name}' is larger than {MAX_SEED_BYTES // 2**20} MiB", fields=("seed_rows",)
        )
    try:
        text = path.read_text(encoding="utf-8")
        rows = (
            json.loads(text)
            if path.suffix.lower() == ".json"
            else [json.loads(line) for line in text.splitlines() if line.strip()]
        )
    except (UnicodeDecodeError, ValueError) as exc:
        raise SourceError(
            f"seed_rows: '{path.name}' is not JSON / JSONL ({str(exc)[:120]})", fields=("seed_rows",)
        ) from None
    if not isinstance(rows, list) or not rows or not all(isinstance(r, dict) for r in rows):
        raise SourceError(
            f"seed_rows: '{path.name}' must hold a non-empty list of objects (rows)", fields=("seed_rows",)
        )
    columns = list(dict.fromkeys(k for r in rows for k in r if isinstance(k, str) and k.isidentifier()))
    return Seeds(rows, columns, [{"file": path.name, "sha256": _sha256(path), "rows": len(rows)}])


def recipe_seeds(recipe: Recipe, settings: Settings) -> Seeds:
    """The seeds of ``recipe``'s one source, its names checked against the columns (``check_names``)."""
    if recipe.documents:
        seeds = document_seeds(recipe, settings)
    elif recipe.seed_rows:
        seeds = dataset_seeds(recipe.seed_rows, settings)
    else:
        seeds = Seeds([{"topic": t} for t in recipe.topics], list(TOPIC_COLUMNS), [{"topics": len(recipe.topics)}])
    if not seeds.rows:
        raise SourceError("documents: the documents gave no text to chunk", fields=("documents",))
    recipe.check_names(seeds.columns)
    return seeds
