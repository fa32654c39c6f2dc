"""Template placeholders filled in: a copy of a JSON / JSON-lines data file with ``{{name}}``
replaced by the values a person typed on the page, kept beside the uploads (the original file is
never changed), and a record of what was filled that ``run.json`` carries.

The copy is named ``<stem>-<first 12 hex of its SHA-256><suffix>``, as ``ui.uploads.keep_upload``
names a kept upload, so the same values on the same file make the same copy once. The record is a
hidden sidecar ``.<copy name>.filled.json``: ``{"source": <original file name>, "source_sha256":
..., "sha256": <the copy's>, "values": {name: value}, "rows": {name: rows replaced}}``.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any, Optional

from trainer_core.data.errors import DatasetError
from trainer_core.data.placeholders import PLACEHOLDER

FILLABLE_SUFFIXES = (".json", ".jsonl")
MAX_VALUE_CHARS = 200
MAX_FILL_BYTES = 200 * 1024 * 1024  # the file is read whole: 200 MB at most


def sidecar(copy: Path) -> Path:
    """The hidden record beside a filled copy (``.<name>.filled.json``)."""
    return copy.with_name(f".{copy.name}.filled.json")


def check_values(values: dict[str, str]) -> dict[str, str]:
    """The non-empty values (stripped). Raises ValueError naming the placeholder when a value is
    over MAX_VALUE_CHARS characters, spans lines or holds ``{{`` / ``}}``."""
    kept = {}
    for name, value in values.items():
        text = (value or "").strip()
        if not text:
            continue
        if len(text) > MAX_VALUE_CHARS or len(text.splitlines()) > 1 or "{{" in text or "}}" in text:
            raise ValueError(
                f"{{{{{name}}}}}: give one line of at most {MAX_VALUE_CHARS} characters without {{{{ or }}}}"
            )
        kept[name] = text
    return kept


def _fill(value: Any, values: dict[str, str], rows: set[str]) -> Any:
    """``value`` with every string's ``{{name}}`` (spaces inside the braces allowed) replaced when
    ``name`` is in ``values``; the names replaced are added to ``rows``. Keys are left alone."""
    if isinstance(value, str):
        if "{{" not in value:
            return value

        def replace(match: Any) -> str:
            name = match.group(1)
            if name in values:
                rows.add(name)
                return values[name]
            return match.group(0)

        return PLACEHOLDER.sub(replace, value)
    if isinstance(value, dict):
        return {key: _fill(item, values, rows) for key, item in value.items()}
    if isinstance(value, list):
        return [_fill(item, values, rows) for item in value]
    return value


def _read(path: Path) -> tuple[Any, bool]:
    """(the parsed file, whether it is JSON lines). Raises DatasetError naming the file."""
    if path.stat().st_size > MAX_FILL_BYTES:
        raise DatasetError(f"{path.name}: over {MAX_FILL_BYTES // 10**6} MB; fill its placeholders with a script")
    text = path.read_text(encoding="utf-8")
    try:
        if path.suffix.lower() == ".jsonl":
            return [json.loads(line) for line in text.splitlines() if line.strip()], True
        return json.loads(text), False
    except json.JSONDecodeError as exc:
        raise DatasetError(f"{path.name}: not valid JSON at line {exc.lineno}: {exc.msg}") from None
    except RecursionError:
        raise DatasetError(f"{path.name}: nested too deeply to be training data") from None


def fill_file(path: str | Path, values: dict[str, str], out_dir: Path) -> tuple[Path, dict[str, int]]:
    """Write ``path`` (a ``.json`` or ``.jsonl`` data file) with its placeholders replaced by
    ``values`` (name -> text; empty values leave theirs) into ``out_dir``; returns (the copy, rows
    replaced per placeholder, those found only). The original is only read; a copy made before from
    the same bytes keeps its record. Raises DatasetError (not a JSON / JSON-lines file, unreadable,
    nested too deeply, over MAX_FILL_BYTES, no value given, none of the placeholders in the file) or
    ValueError (a bad value, named)."""
    source = Path(path)
    if source.suffix.lower() not in FILLABLE_SUFFIXES:
        raise DatasetError(
            f"{source.name}: placeholders can be filled on the page in .json and .jsonl files; "
            "replace them in this file with an editor or a script"
        )
    given = check_values(values)
    if not given:
        raise DatasetError("type a value for at least one placeholder")
    data, lines = _read(source)
    rows_list = data if isinstance(data, list) else [data]
    counts = {name: 0 for name in given}
    try:
        filled_rows = []
        for row in rows_list:
            seen: set[str] = set()
            filled_rows.append(_fill(row, given, seen))
            for name in seen:
                counts[name] += 1
        filled = filled_rows if isinstance(data, list) else filled_rows[0]
        if lines:
            body = "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in filled_rows)
        else:
            body = json.dumps(filled, ensure_ascii=False, indent=2) + "\n"
    except RecursionError:
        raise DatasetError(f"{source.name}: nested too deeply to be training data") from None
    counts = {name: rows for name, rows in counts.items() if rows}
    if not counts:
        listed = ", ".join(f"{{{{{name}}}}}" for name in given)
        raise DatasetError(f"{source.name} holds none of {listed}: preview the file again and fill what it shows")
    raw = body.encode("utf-8")
    stem = source.name[: len(source.name) - len(source.suffix)][:80]
    out_dir.mkdir(parents=True, exist_ok=True)
    copy = out_dir / f"{stem}-{hashlib.sha256(raw).hexdigest()[:12]}{source.suffix.lower()}"
    if copy.is_file() and fill_record(copy) is not None:
        return copy, counts  # the same bytes were made before: that copy and its record stand
    part = copy.with_name(f".{copy.name}.part")
    part.write_bytes(raw)
    record = {
        "source": source.name,
        "source_sha256": hashlib.sha256(source.read_bytes()).hexdigest(),
        "sha256": hashlib.sha256(raw).hexdigest(),
        "values": given,
        "rows": counts,
    }
    sidecar(copy).write_text(json.dumps(record, ensure_ascii=False, indent=2), encoding="utf-8")
    part.replace(copy)
    return copy, counts


def fill_record(path: str | Path, content: Optional[Path] = None) -> Optional[dict[str, Any]]:
    """What was filled into the data file at ``path`` (``fill_file``'s record), or None for a file
    that is not a filled copy (or whose record cannot be read). ``content``: a file that must hold
    the copy's very bytes (e.g. the copy as the browser sent it back), checked by its SHA-256; a
    file of the same name with other bytes gets None."""
    record = sidecar(Path(path))
    try:
        data = json.loads(record.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict):
        return None
    if content is not None:
        digest = hashlib.sha256()
        try:
            with Path(content).open("rb") as fh:
                for block in iter(lambda: fh.read(1 << 20), b""):
                    digest.update(block)
        except OSError:
            return None
        if data.get("sha256") != digest.hexdigest():
            return None
    return data
