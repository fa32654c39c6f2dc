"""The one way Start, the check's exact pass, resume and evaluation turn a request's split into
tokens: ``tokenized`` looks the split up in the cache and reads and tokenizes its rows only on a
miss, writing the Arrow files into the cache (``Dataset.map`` on every core) and reading them back
memory mapped.
"""

from __future__ import annotations

import logging
import os
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Optional

import datasets

from trainer_core.data import tokenization
from trainer_core.data.token_cache import store
from trainer_core.data.token_cache.key import CacheKey, cache_key
from trainer_core.data.tool_rows import TOOLS, trained_tool_format
from trainer_core.schemas import TrainingStartRequest

log = logging.getLogger(__name__)

ROWS_PER_PROCESS = 10_000  # fewer rows than this a process: starting one costs more than it saves
CANONICAL = ("messages", TOOLS, "text")  # the columns tokenized; any other input column is the caller's
Rows = Callable[[], tuple[datasets.Dataset, Optional[str]]]  # (canonical rows, their format) when needed


@dataclass
class CacheHit:
    """How a split came to be tokenized: from the cache (``hit``) or not, under ``key`` (None:
    not cached), its ``rows`` and the ``seconds`` it took; with what training reads beside the
    tokens (``format``, ``system_message``, ``tool_format``) for a training split."""

    key: Optional[str]
    hit: bool
    rows: int
    seconds: float
    format: Optional[str] = None
    system_message: Optional[str] = None
    tool_format: Optional[str] = None

    def line(self) -> str:
        """The run log's line: "data: cache hit <key>, N rows, X.X s" (or miss / not cached)."""
        if self.key is None:
            return f"data: not cached, tokenized {self.rows} rows, {self.seconds:.1f} s"
        what = "cache hit" if self.hit else "cache miss (stored)"
        return f"data: {what} {self.key}, {self.rows} rows, {self.seconds:.1f} s"


def processes(rows: int) -> int:
    """Processes to tokenize ``rows`` with: one per usable core, at least ROWS_PER_PROCESS rows each."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    return max(1, min(cores, rows // ROWS_PER_PROCESS))


def tokenized(
    request: TrainingStartRequest, tokenizer: Any, split: str, rows: Rows, desc: Optional[str] = None
) -> tuple[datasets.Dataset, CacheHit]:
    """``split`` ("train" / "eval") of ``request`` as ``tokenization.encode_rows`` makes it (every
    row, with the counting columns), from the cache when it holds it (``rows`` is then never
    called), else tokenized from ``rows()`` and stored. Raises DatasetError as ``encode_rows`` does."""
    started = time.perf_counter()
    key = cache_key(request, tokenizer, split) if store.enabled() else None
    found = _hit(key, split, started)
    if found is not None:
        return found
    canonical, fmt = rows()
    canonical = canonical.select_columns([c for c in canonical.column_names if c in CANONICAL])
    extra = _training_extras(canonical, tokenizer, fmt) if split == "train" else {}
    args = (canonical, tokenizer, request.max_seq_length, request.train_on_completions)
    if key is None:
        encoded = tokenization.encode_rows(*args, desc=desc, num_proc=processes(len(canonical)))
    else:
        staging = store.staging_folder(key)
        try:
            tokenization.encode_rows(
                *args, desc=desc, num_proc=processes(len(canonical)), cache_file_name=str(staging / "tokens.arrow")
            )
            store.commit(staging, key, len(canonical), **extra)
        finally:
            if staging.exists():  # not moved into place: a failure
                shutil.rmtree(staging, ignore_errors=True)
        encoded, _ = store.load(key) or (None, None)
        if encoded is None:  # evicted at once (a cache smaller than this split) or removed meanwhile
            raise RuntimeError(f"token cache entry {key.key} vanished right after it was stored")
    hit = CacheHit(key.key if key else None, False, len(encoded), time.perf_counter() - started, **extra)
    log.info("%s split: %s", split, hit.line())
    return encoded, hit


def cached(request: TrainingStartRequest, tokenizer: Any, split: str) -> Optional[tuple[datasets.Dataset, CacheHit]]:
    """``split`` of ``request`` as ``tokenized`` gives it when the cache holds it, without reading a
    row (the key's content hashes prove the files are those once tokenized); None when it does not
    (or the split is not cached: ``cache_key``, the cache off)."""
    started = time.perf_counter()
    return _hit(cache_key(request, tokenizer, split) if store.enabled() else None, split, started)


def _hit(key: Optional[CacheKey], split: str, started: float) -> Optional[tuple[datasets.Dataset, CacheHit]]:
    """The entry of ``key`` (memory mapped) with its CacheHit, or None."""
    found = store.load(key) if key is not None else None
    if found is None:
        return None
    encoded, entry = found
    extra = {"format": entry.format, "system_message": entry.system_message, "tool_format": entry.tool_format}
    hit = CacheHit(key.key, True, len(encoded), time.perf_counter() - started, **extra)
    log.info("%s split: %s", split, hit.line())
    return encoded, hit


def _training_extras(rows: datasets.Dataset, tokenizer: Any, fmt: Optional[str]) -> dict[str, Optional[str]]:
    """What training records beside a training split's tokens: its format, shared system message
    and tool format."""
    from trainer_core.data.system_message import shared_system_message

    return {
        "format": fmt,
        "system_message": shared_system_message(rows),
        "tool_format": trained_tool_format(rows, tokenizer),
    }


__all__ = ["CacheHit", "Rows", "cached", "processes", "tokenized"]
