"""A Hugging Face cache layout in a temp folder (``<repo>/blobs``, ``snapshots/<commit>/<file>``
symlinks to the blobs, ``refs/main``), as ``huggingface_hub`` writes it, for offline tests of
``scan_cache_dir`` and ``snapshot_download(local_files_only=True)``. Point the library at it with
``monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(cache))``."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

FOLDER_PREFIX = {"model": "models", "dataset": "datasets", "space": "spaces"}


def fake_hub_repo(
    cache: Path, repo_id: str, files: dict[str, bytes], repo_type: str = "model", commit: str = "0" * 40
) -> Path:
    """Write ``files`` (name in the repo -> content) as snapshot ``commit`` of ``repo_id`` (``refs/main``
    points at it) under ``cache``; returns the snapshot folder."""
    repo = cache / f"{FOLDER_PREFIX[repo_type]}--{repo_id.replace('/', '--')}"
    snapshot = repo / "snapshots" / commit
    (repo / "blobs").mkdir(parents=True, exist_ok=True)
    snapshot.mkdir(parents=True, exist_ok=True)
    (repo / "refs").mkdir(exist_ok=True)
    (repo / "refs" / "main").write_text(commit)
    for name, content in files.items():
        blob = repo / "blobs" / hashlib.sha256(content).hexdigest()
        blob.write_bytes(content)
        link = snapshot / name
        link.parent.mkdir(parents=True, exist_ok=True)
        os.symlink(os.path.relpath(blob, link.parent), link)
    return snapshot
