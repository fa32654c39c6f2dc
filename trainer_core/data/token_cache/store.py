"""The cache's folder: one sub-folder per key under ``<data dir>/token_cache/`` holding the split's
Arrow files (``tokens*.arrow``, as ``Dataset.map`` wrote them) and ``entry.json`` (what it holds and
when it was last used), read back memory mapped. Bounded by ``token_cache_mb``: storing an entry
evicts the least recently used others until the folder fits (the newest is kept even when it alone
is larger). Keys are checked for their shape and every folder goes through ``paths.confine``.
"""

from __future__ import annotations

import json
import logging
import re
import shutil
import time
import uuid
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Optional

import datasets

from trainer_core.data.token_cache.key import KEY_CHARS, CacheKey
from trainer_core.paths import confine
from trainer_core.refusals import Refusal
from trainer_core.settings import Settings, get_settings

log = logging.getLogger(__name__)

ENTRY_FILE = "entry.json"
ARROW_GLOB = "tokens*.arrow"
KEY_PATTERN = re.compile(rf"^[0-9a-f]{{{KEY_CHARS}}}$")
MIB = 2**20


class UnknownCacheEntry(Refusal):
    """A key that is not (or no longer) in the token cache."""

    code = "unknown_cache_entry"
    status = 404


@dataclass
class Entry:
    """One cached split, as listed: its ``key``, ``split``, ``sources`` (file names), ``model``, ``rows``,
    ``size_bytes``, ``created`` / ``last_used`` (Unix seconds), and what training reads beside the
    tokens (``format``, ``system_message``, ``tool_format``)."""

    key: str
    split: str
    sources: list[str]
    model: str
    rows: int
    size_bytes: int
    created: float
    last_used: float
    format: Optional[str] = None
    system_message: Optional[str] = None
    tool_format: Optional[str] = None


def cache_root(settings: Optional[Settings] = None) -> Path:
    """``<data dir>/token_cache`` (made when missing) of ``settings`` (default: the process's)."""
    root = (settings or get_settings()).data_dir / "token_cache"
    root.mkdir(parents=True, exist_ok=True)
    return root


def enabled() -> bool:
    """False when ``token_cache_mb`` is 0: every split is tokenized anew and nothing is kept."""
    return get_settings().token_cache_mb > 0


def entry_folder(key: str, settings: Optional[Settings] = None) -> Path:
    """The folder of ``key``, confined to the cache root. Raises UnknownCacheEntry for anything that
    is not a key's shape (KEY_CHARS lowercase hex characters), PathNotAllowed should it resolve outside."""
    if not isinstance(key, str) or not KEY_PATTERN.match(key):
        raise UnknownCacheEntry(f"key: not a token cache key ({KEY_CHARS} hex characters)", fields=("key",))
    root = cache_root(settings)
    return confine(root / key, [root], "key")


def _read_entry(folder: Path) -> Optional[Entry]:
    try:
        return Entry(**json.loads((folder / ENTRY_FILE).read_text(encoding="utf-8")))
    except (OSError, ValueError, TypeError):
        return None


def _write_entry(folder: Path, entry: Entry) -> None:
    tmp = folder / f".{ENTRY_FILE}.{uuid.uuid4().hex}"
    tmp.write_text(json.dumps(asdict(entry)), encoding="utf-8")
    tmp.replace(folder / ENTRY_FILE)


def load(key: CacheKey) -> Optional[tuple[datasets.Dataset, Entry]]:
    """The cached split of ``key`` (memory mapped) and its entry, marked used now; None when absent
    or unreadable (an unreadable entry is removed)."""
    if not enabled():
        return None
    folder = entry_folder(key.key)
    entry = _read_entry(folder) if folder.is_dir() else None
    files = sorted(folder.glob(ARROW_GLOB)) if entry else []
    if entry is None or not files:
        return None
    try:
        parts = [datasets.Dataset.from_file(str(file)) for file in files]
    except Exception as exc:  # noqa: BLE001 - a damaged entry is tokenized again
        log.warning("token cache: entry %s unreadable (%s); removing it", key.key, exc)
        shutil.rmtree(folder, ignore_errors=True)
        return None
    entry.last_used = time.time()
    _write_entry(folder, entry)
    return (parts[0] if len(parts) == 1 else datasets.concatenate_datasets(parts)), entry


def staging_folder(key: CacheKey) -> Path:
    """A fresh folder for ``key``'s Arrow files, moved into place by ``commit``."""
    folder = confine(cache_root() / f".staging-{key.key}-{uuid.uuid4().hex[:8]}", [cache_root()], "key")
    folder.mkdir()
    return folder


def commit(staging: Path, key: CacheKey, rows: int, **extra: Optional[str]) -> Entry:
    """Move ``staging`` (holding the split's Arrow files) into ``key``'s place with its entry,
    then evict down to ``token_cache_mb``. Another process having stored the same key first wins."""
    now = time.time()
    size = sum(file.stat().st_size for file in staging.glob(ARROW_GLOB))
    entry = Entry(key.key, key.split, list(key.sources), key.model, rows, size, now, now, **extra)
    _write_entry(staging, entry)
    folder = entry_folder(key.key)
    try:
        staging.rename(folder)
    except OSError:  # already stored by a concurrent pass: keep that one
        shutil.rmtree(staging, ignore_errors=True)
    evict(get_settings().token_cache_mb * MIB, keep=key.key)
    return entry


def entries(settings: Optional[Settings] = None) -> list[Entry]:
    """Every complete entry, most recently used first."""
    folders = [f for f in cache_root(settings).iterdir() if KEY_PATTERN.match(f.name) and not f.is_symlink()]
    found = [_read_entry(folder) for folder in folders]
    return sorted((entry for entry in found if entry), key=lambda entry: entry.last_used, reverse=True)


def delete(key: str, settings: Optional[Settings] = None) -> Entry:
    """Remove ``key``'s entry. Raises UnknownCacheEntry when there is none (or ``key`` is no key)."""
    folder = entry_folder(key, settings)
    entry = _read_entry(folder) if folder.is_dir() else None
    if entry is None:
        raise UnknownCacheEntry(f"key: no token cache entry {key}", fields=("key",))
    shutil.rmtree(folder)
    log.info("token cache: deleted %s (%.1f MB)", key, entry.size_bytes / MIB)
    return entry


def evict(limit_bytes: int, keep: Optional[str] = None) -> list[str]:
    """Delete least recently used entries (never ``keep``) until the cache holds at most
    ``limit_bytes``; returns the deleted keys."""
    listed = entries()
    total = sum(entry.size_bytes for entry in listed)
    gone = []
    for entry in reversed(listed):  # least recently used first
        if total <= limit_bytes:
            break
        if entry.key == keep:
            continue
        shutil.rmtree(cache_root() / entry.key, ignore_errors=True)
        total -= entry.size_bytes
        gone.append(entry.key)
        log.info(
            "token cache: evicted %s (%.1f MB, last used %s)",
            entry.key,
            entry.size_bytes / MIB,
            time.ctime(entry.last_used),
        )
    return gone


__all__ = [
    "Entry",
    "UnknownCacheEntry",
    "cache_root",
    "commit",
    "delete",
    "enabled",
    "entries",
    "entry_folder",
    "evict",
    "load",
    "staging_folder",
]
