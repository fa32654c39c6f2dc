"""One zip per run for the Runs tab's download: its ``run.json`` and its final weights.

Layout (flat): ``run.json``, ``metrics.jsonl`` and the files the final save wrote at the top of the
run folder (the adapter, ``adapter_model.safetensors`` + ``adapter_config.json``, or the full
model's weights and config, and the tokenizer files). Checkpoints (``checkpoint-N/``), exports and
evaluations (sub-folders), staging folders, the worker's log and the run's marker stay out.
"""

from __future__ import annotations

import os
import zipfile
from pathlib import Path

from trainer_core.paths import is_within
from trainer_core.runs.folders import MARKER
from trainer_core.training.manifest import RUN_JSON

LEFT_OUT = {MARKER, "worker.log", "request.json"}  # request.json: the same settings are in run.json
STORED_SUFFIXES = (".safetensors", ".bin", ".pt", ".gguf")  # weights barely compress: stored as they are


class BundleError(ValueError):
    """The folder cannot be bundled; the message names it and says why."""


def bundle_files(output_dir: Path) -> list[Path]:
    """The files ``run_bundle`` puts in the zip, ``run.json`` first then by name (see the module
    docstring). Links are left out. Raises BundleError when ``output_dir`` holds no ``run.json`` or
    its ``run.json`` is a link (which could point anywhere)."""
    output_dir = Path(output_dir)
    record = output_dir / RUN_JSON
    if record.is_symlink() or (record.exists() and not is_within(record.resolve(), output_dir.resolve())):
        raise BundleError(
            f"{output_dir.name}/{RUN_JSON} is a link, not the run's own record: the bundle is not made "
            "(no file outside the run folder goes into a zip)"
        )
    if not record.is_file():
        raise BundleError(
            f"{output_dir} has no {RUN_JSON}: it is not a run folder, or its run was made by a "
            "version without run records (only runs started since can be downloaded as a bundle)"
        )
    files = [
        p
        for p in sorted(output_dir.iterdir())
        if p.is_file()
        and not p.is_symlink()
        and p.name != RUN_JSON
        and p.name not in LEFT_OUT
        and not p.name.startswith(".")
    ]
    return [output_dir / RUN_JSON, *files]


def run_bundle(output_dir: Path, dest_dir: Path) -> Path:
    """Write ``<dest_dir>/<run folder name>.zip`` holding ``bundle_files(output_dir)`` (written to a
    temporary name, then renamed, so a half zip never has the final name) and return its path.
    Raises BundleError (no ``run.json``) or OSError."""
    output_dir, dest_dir = Path(output_dir), Path(dest_dir)
    files = bundle_files(output_dir)
    dest_dir.mkdir(parents=True, exist_ok=True)
    archive = dest_dir / f"{output_dir.name}.zip"
    partial = dest_dir / f".{archive.name}.partial"
    try:
        with zipfile.ZipFile(partial, "w", compression=zipfile.ZIP_DEFLATED) as zf:
            for file in files:
                method = zipfile.ZIP_STORED if file.suffix in STORED_SUFFIXES else zipfile.ZIP_DEFLATED
                zf.write(file, file.name, compress_type=method)
        os.replace(partial, archive)
    finally:
        partial.unlink(missing_ok=True)
    return archive
