"""The fingerprint of one tokenized split: what the rows are (each file's content hash, or the Hub
dataset's commit), how they become canonical rows (format, mapping, slice, ``val_size`` split and
seed), and how they become tokens (the tokenizer's files, its chat template, ``max_seq_length``,
``train_on_completions``, method, packing). The same content under another path gives the same key;
any change to one of those gives another.
"""

from __future__ import annotations

import hashlib
import json
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

from trainer_core.schemas import TrainingStartRequest
from trainer_core.vocabulary import TrainingMethod

log = logging.getLogger(__name__)

FORMAT_VERSION = 1  # raise when the encoders change what they write for the same rows
KEY_CHARS = 24  # hex characters of a key (96 bits)
TOKEN_SETTINGS = (
    "format_type",
    "custom_format_mapping",
    "training_method",
    "dataset_slice_start",
    "dataset_slice_end",
    "val_size",
    "random_seed",
    "max_seq_length",
    "train_on_completions",
    "default_chat_template",
    "packing",
    "subset",
)  # request fields that change the rows or their tokens
TOKENIZER_FILES = (
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "added_tokens.json",
    "tokenizer.model",
    "vocab.json",
    "vocab.txt",
    "merges.txt",
    "chat_template.jinja",
    "chat_template.json",
)  # the files a tokenizer folder may hold that decide its tokens
CHUNK_BYTES = 1 << 20
DIGESTS_KEPT = 256  # file digests remembered per process


@dataclass(frozen=True)
class CacheKey:
    """One split's fingerprint (``key``, KEY_CHARS hex characters) and what it names, for listing:
    ``split`` ("train" or "eval"), the ``sources`` (file names or "hub-id [split]") and ``model``."""

    key: str
    split: str
    sources: tuple[str, ...]
    model: str


_digests: dict[tuple[str, int, int, int, int], str] = {}  # a file's digest by its path, size, inode and times


def file_digest(path: Path) -> str:
    """SHA-256 of a file's bytes (or of a folder's files, names relative to it, in sorted order).
    A file's is remembered for this process while its size, inode, modification and change times
    stay the same (a Start after its check hashes a large file once)."""
    if path.is_file():
        stat = path.stat()
        seen = (str(path.resolve()), stat.st_size, stat.st_ino, stat.st_mtime_ns, stat.st_ctime_ns)
        if seen not in _digests:
            if len(_digests) >= DIGESTS_KEPT:
                _digests.clear()
            _digests[seen] = _content_digest(path)
        return _digests[seen]
    return _content_digest(path)


def _content_digest(path: Path) -> str:
    digest = hashlib.sha256()
    files = sorted(p for p in path.rglob("*") if p.is_file()) if path.is_dir() else [path]
    for file in files:
        if path.is_dir():
            digest.update(str(file.relative_to(path)).encode("utf-8", "surrogatepass") + b"\0")
        with file.open("rb") as fh:
            while chunk := fh.read(CHUNK_BYTES):
                digest.update(chunk)
    return digest.hexdigest()


def tokenizer_digest(tokenizer: Any) -> str:
    """SHA-256 of what decides a tokenizer's tokens: its class, its files (its folder's
    ``TOKENIZER_FILES``; without a folder, a fast tokenizer's serialised form), its chat template
    as set (``default_chat_template`` may replace the folder's) and its special tokens."""
    digest = hashlib.sha256(type(tokenizer).__name__.encode())
    folder = Path(str(getattr(tokenizer, "name_or_path", "")))
    if folder.is_dir():
        for name in TOKENIZER_FILES:
            if (folder / name).is_file():
                digest.update(name.encode() + b"\0" + file_digest(folder / name).encode())
    elif hasattr(tokenizer, "backend_tokenizer"):
        digest.update(tokenizer.backend_tokenizer.to_str().encode())
    else:
        digest.update(json.dumps(sorted(tokenizer.get_vocab().items())).encode())
    template = getattr(tokenizer, "chat_template", None)
    digest.update(json.dumps(template, sort_keys=True, default=str).encode())
    digest.update(json.dumps(getattr(tokenizer, "special_tokens_map", {}), sort_keys=True, default=str).encode())
    return digest.hexdigest()


def hub_revision(request: TrainingStartRequest) -> Optional[str]:
    """The commit of the request's Hub dataset as the Hub names it now; None when the Hub cannot
    say (offline, no access): such data is tokenized without the cache."""
    try:
        from huggingface_hub import HfApi

        token = request.hf_token.get_secret_value() if request.hf_token else None
        return HfApi().dataset_info(request.hf_dataset, token=token, timeout=10).sha
    except Exception as exc:  # noqa: BLE001 - any failure only means "not cached"
        log.info(
            "token cache: no revision for %s (%s); tokenizing without the cache", request.hf_dataset, type(exc).__name__
        )
        return None


def split_sources(request: TrainingStartRequest, split: str) -> tuple[list[str], Optional[str]]:
    """(local paths, Hub split or None) that ``split`` ("train" / "eval") is read from; with
    ``val_size`` the evaluation rows come from the training sources."""
    if split == "train" or request.val_size > 0:
        return list(request.local_datasets), request.train_split if request.hf_dataset else None
    hub = request.eval_split if request.hf_dataset and not request.local_eval_datasets else None
    return list(request.local_eval_datasets), hub


def cache_key(request: TrainingStartRequest, tokenizer: Any, split: str) -> Optional[CacheKey]:
    """The fingerprint of ``request``'s ``split`` tokenized by ``tokenizer``; None where the split is
    not cached: methods other than SFT (TRL tokenizes their rows) or Hub data without a known commit."""
    if request.training_method != TrainingMethod.sft:
        return None
    paths, hub_split = split_sources(request, split)
    contents: list[Any] = [["file", file_digest(Path(path).expanduser())] for path in paths]
    names = [Path(path).name for path in paths]
    if hub_split is not None:
        revision = hub_revision(request)
        if revision is None:
            return None
        contents.append(["hub", request.hf_dataset, revision, hub_split])
        names.append(f"{request.hf_dataset} [{hub_split}]")
    settings = {name: request.model_dump(mode="json", include={name})[name] for name in TOKEN_SETTINGS}
    fingerprint = {
        "version": FORMAT_VERSION,
        "split": split,
        "data": contents,
        "tokenizer": tokenizer_digest(tokenizer),
        "settings": settings,
    }
    text = json.dumps(fingerprint, sort_keys=True)
    key = hashlib.sha256(text.encode()).hexdigest()[:KEY_CHARS]
    return CacheKey(key=key, split=split, sources=tuple(names), model=Path(str(tokenizer.name_or_path)).name)


__all__ = ["KEY_CHARS", "TOKEN_SETTINGS", "CacheKey", "cache_key", "file_digest", "tokenizer_digest"]
