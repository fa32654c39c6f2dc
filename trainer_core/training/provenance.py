"""What a run was made from, for its ``run.json``: dataset file fingerprints, package versions and
the machine. Plain JSON-able dicts; nothing here needs the training stack."""

from __future__ import annotations

import hashlib
import logging
import os
import platform
from importlib import metadata
from pathlib import Path
from typing import Any, Optional

import psutil

from trainer_core.data.fill import fill_record
from trainer_core.schemas import TrainingStartRequest
from trainer_core.vocabulary import FormatType

log = logging.getLogger(__name__)
PACKAGES = ("torch", "transformers", "trl", "peft", "datasets", "gradio", "bitsandbytes")
GIB = 1024**3
CHUNK_BYTES = 1 << 20


def package_versions() -> dict[str, Optional[str]]:
    """``{"python": "3.11.9", "torch": "2.13.0+cpu", ...}`` via ``importlib.metadata``; a package
    that is not installed maps to None."""
    versions: dict[str, Optional[str]] = {"python": platform.python_version()}
    for name in PACKAGES:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = None
    return versions


def cpu_model() -> Optional[str]:
    """The CPU's model name (``/proc/cpuinfo``'s "model name" on Linux, else ``platform.processor()``),
    or None when neither says."""
    try:
        for line in Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace").splitlines():
            if line.lower().startswith("model name"):
                return line.split(":", 1)[1].strip() or None
    except OSError:
        pass
    return platform.processor() or None


def hardware_info() -> dict[str, Any]:
    """``{"cpu_model", "cpu_cores" (logical), "ram_gib", "gpus": [{"name", "memory_gib"}]}``; ``gpus``
    is empty without CUDA devices (read through ``trainer_core.hardware``: nvidia-smi, else an
    already imported torch)."""
    from trainer_core.hardware import cached_snapshot

    gpus = cached_snapshot(max_age_s=60.0).gpus
    return {
        "cpu_model": cpu_model(),
        "cpu_cores": os.cpu_count(),
        "ram_gib": round(psutil.virtual_memory().total / GIB, 2),
        "gpus": [{"name": g.name, "memory_gib": round(g.memory_total_gib, 2)} for g in gpus],
    }


def sha256_of(path: Path) -> str:
    """Hex SHA-256 of a file's bytes (read in 1 MiB chunks). Raises OSError."""
    digest = hashlib.sha256()
    with Path(path).open("rb") as fh:
        while chunk := fh.read(CHUNK_BYTES):
            digest.update(chunk)
    return digest.hexdigest()


def file_fingerprint(path: Path) -> dict[str, Any]:
    """``{"sha256", "size_bytes"}`` of a file; of a folder, the SHA-256 over its files' relative
    paths and hashes (sorted) and their total size. Both None when it cannot be read."""
    path = Path(path)
    try:
        if path.is_dir():
            files = sorted(p for p in path.rglob("*") if p.is_file())
            digest = hashlib.sha256()
            for file in files:
                digest.update(f"{file.relative_to(path).as_posix()}\0{sha256_of(file)}\n".encode())
            return {"sha256": digest.hexdigest(), "size_bytes": sum(f.stat().st_size for f in files)}
        return {"sha256": sha256_of(path), "size_bytes": path.stat().st_size}
    except OSError as exc:
        log.warning("cannot fingerprint %s: %s", path, exc)
        return {"sha256": None, "size_bytes": None}


def rows_and_format(path: str, request: TrainingStartRequest) -> dict[str, Any]:
    """``{"rows", "format"}`` of one data file as the data layer reads it (rows in the file, before
    any slice; the layout detected after ``custom_format_mapping``, or ``format_type`` when set).
    Both None when the file cannot be read (the reason is logged)."""
    from trainer_core.data.files import read_file
    from trainer_core.data.formats import apply_mapping
    from trainer_core.data.preference import detect_layout

    try:
        rows = read_file(path)
        if request.custom_format_mapping:
            rows = apply_mapping(rows, request.custom_format_mapping, Path(path).name)
        fmt = (
            detect_layout(rows.column_names, request.training_method, Path(path).name)
            if request.format_type == FormatType.auto
            else request.format_type
        )
        return {"rows": len(rows), "format": fmt.value}
    except Exception as exc:  # noqa: BLE001 - a record of the run, not a check of its data
        log.warning("cannot read %s for run.json: %s", path, exc)
        return {"rows": None, "format": None}


def dataset_entries(request: TrainingStartRequest, with_rows: bool = True) -> list[dict[str, Any]]:
    """One entry per data source of ``request``: each local file (``role`` "train" or "eval") with
    ``path``, ``sha256``, ``size_bytes`` and (``with_rows``) ``rows`` and ``format``, plus
    ``filled_from`` for a copy whose placeholders were filled in (``data.fill.fill_record``); the Hub dataset
    as ``hub_id``, ``subset``, ``split`` (no hash: the Hub keeps the versions)."""
    entries = []
    for role, paths in (("train", request.local_datasets), ("eval", request.local_eval_datasets)):
        for path in paths:
            entry = {"role": role, "path": path, **file_fingerprint(Path(path))}
            entry.update(rows_and_format(path, request) if with_rows else {"rows": None, "format": None})
            filled = fill_record(path)
            if filled is not None:  # a copy with template placeholders filled in on the page
                entry["filled_from"] = filled
            entries.append(entry)
    if request.hf_dataset:
        for role, split in (("train", request.train_split), ("eval", request.eval_split)):
            if split:
                entries.append({"role": role, "hub_id": request.hf_dataset, "subset": request.subset, "split": split})
    return entries
