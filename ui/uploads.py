"""Uploaded dataset files: check that a file value is one this server received, and keep it."""

from __future__ import annotations

import hashlib
import re
import shutil
from pathlib import Path
from typing import Optional

from trainer_core.data.compressed import DATA_SUFFIXES, data_suffix
from trainer_core.paths import PathNotAllowed, confine
from trainer_core.settings import Settings
from ui.refused import Refused

UPLOAD_LABEL = "Training dataset (upload)"
EVAL_UPLOAD_LABEL = "Evaluation dataset (upload, optional)"
UPLOAD_FIELDS = {UPLOAD_LABEL: "local_datasets", EVAL_UPLOAD_LABEL: "local_eval_datasets"}  # the field each fills
DATASET_TYPES = list(DATA_SUFFIXES)  # gr.File(file_types=...): .json ... .txt, and .json.gz, .jsonl.zst, ...


def split_paths(text: str) -> list[str]:
    """Comma- or newline-separated paths typed in a textbox."""
    return [p.strip() for p in (text or "").replace("\n", ",").split(",") if p.strip()]


def received_upload(upload: Optional[str], settings: Settings, label: str = UPLOAD_LABEL) -> Optional[Path]:
    """The uploaded file, checked to be one this server received: inside Gradio's upload folder or
    our uploads folder (the same path rule as typed paths). A raw queue call can send any path in a
    FileData value, and Gradio does not check it when the Blocks are mounted, so we do. Raises
    ``gr.Error`` naming the upload field (``label``; its request field, ``UPLOAD_FIELDS``, is
    marked); nothing is read or copied then."""
    if not upload:
        return None
    from gradio.utils import get_upload_folder

    fields = [UPLOAD_FIELDS[label]] if label in UPLOAD_FIELDS else []
    try:
        path = confine(str(upload), [Path(get_upload_folder()), settings.uploads_dir], label)
    except PathNotAllowed:
        raise Refused(f"{label}: this file was not uploaded to this server; upload it again", fields=fields) from None
    if not path.is_file():
        raise Refused(f"{label}: the upload is no longer on the server; upload it again", fields=fields)
    return path


def keep_upload(upload: Optional[str], settings: Settings, label: str = UPLOAD_LABEL) -> Optional[str]:
    """Copy a checked upload (``received_upload``) into the data dir's uploads folder as
        ``<name>-<first 12 hex of its SHA-256><ext>`` (``ext`` whole: ``.jsonl.zst``): the same content is
        kept once, and a different file of the same name never replaces one a run uses; a file already
    named so that is in that folder (a filled copy the page sent back through the upload box) is that
    file. Returns the kept path."""
    path = received_upload(upload, settings, label)
    if path is None:
        return None
    target_dir = settings.uploads_dir.resolve()
    if path.parent == target_dir:
        return str(path)
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    target_dir.mkdir(parents=True, exist_ok=True)
    suffix = data_suffix(path) if data_suffix(path) in DATA_SUFFIXES else path.suffix
    stem = path.name[: len(path.name) - len(suffix)] if suffix else path.name
    if stem.endswith(f"-{digest.hexdigest()[:12]}") and (target_dir / path.name).is_file():
        return str(target_dir / path.name)  # a kept file sent back (e.g. a filled copy): the same one
    target = target_dir / f"{stem[:100]}-{digest.hexdigest()[:12]}{suffix}"
    if not target.is_file():
        tmp = target.with_name(f".{target.name}.part")
        shutil.copyfile(path, tmp)
        tmp.replace(target)
    return str(target)


KEPT_NAME = re.compile(r"(?:[^\s'\"`(),;]*/)?([^\s/'\"`(),;]+?)-[0-9a-f]{12}(\.[A-Za-z0-9]+(?:\.[A-Za-z0-9]+)?)")


def shown_names(text: str, settings: Settings) -> str:
    """``text`` with each kept upload (``keep_upload``'s ``<name>-<12 hex><ext>`` in the uploads
    folder, by path or by name) named as the user's file was: ``mllm_demo.json``, as the preview
    names it. Other names are left as they are."""
    folder = settings.uploads_dir.resolve()

    def named(match: re.Match) -> str:
        whole = match.group(0)
        kept = folder / Path(whole).name
        inside = "/" not in whole or Path(whole).resolve().parent == folder
        return f"{match.group(1)}{match.group(2)}" if inside and kept.is_file() else whole

    return KEPT_NAME.sub(named, text)
