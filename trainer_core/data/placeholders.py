"""Template placeholders left in training data, such as ``{{name}}`` and ``{{author}}`` in
LLaMA-Factory's ``data/identity.json``, and advice on filling them in before training.

LLaMA-Factory's README asks users to replace those two placeholders in identity.json before
fine-tuning; a model trained on the file as it is learns to answer with the braces literally.
"""

from __future__ import annotations

import json
import re
import shlex
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# ``{{name}}`` / ``{{ name }}``: a Jinja- or Mustache-style variable; single braces are left alone
# (they are common in code and JSON inside training text).
PLACEHOLDER = re.compile(r"\{\{\s*([A-Za-z_][A-Za-z0-9_.\-]*)\s*\}\}")


@dataclass(frozen=True)
class PlaceholderCount:
    """One placeholder name (``"name"`` for ``{{name}}``) and the number of rows that hold it."""

    name: str
    rows: int


def _strings(value: Any) -> Iterable[str]:
    """Every string inside ``value`` (nested dicts and lists walked; keys are not)."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from _strings(item)
    elif isinstance(value, (list, tuple)):
        for item in value:
            yield from _strings(item)


def find_placeholders(rows: Iterable[dict[str, Any]]) -> list[PlaceholderCount]:
    """Distinct ``{{name}}`` placeholders in any string field (nested ones included) of ``rows``
    (raw file rows as dicts), sorted by name, each with the number of rows holding it at least once.
    Cost: one pass over the strings; a cheap ``"{{" in text`` test skips most of them."""
    counts: Counter[str] = Counter()
    for row in rows:
        found: set[str] = set()
        for text in _strings(row):
            if "{{" in text:
                found.update(PLACEHOLDER.findall(text))
        counts.update(found)
    return [PlaceholderCount(name, counts[name]) for name in sorted(counts)]


def _sed_pattern(name: str) -> str:
    """``{{name}}`` as a GNU sed basic regular expression (braces are literal there; dots escaped)."""
    return "{{" + name.replace(".", r"\.") + "}}"


def placeholder_advice(names: list[str], path: str) -> str:
    """Markdown advice for filling in placeholders ``names`` (e.g. ``["author", "name"]``) of the
    data file at ``path``: a one-line ``sed -i`` command (Linux / macOS with GNU sed) and an equivalent
    Python one-liner, with ``YOUR_<NAME>`` values to edit. '' when ``names`` is empty. The commands
    match the exact spelling ``{{name}}`` (no spaces inside the braces)."""
    if not names:
        return ""
    quoted = shlex.quote(str(path))
    values = {name: "YOUR_" + re.sub(r"\W", "_", name).upper() for name in names}
    script = "; ".join(f"s/{_sed_pattern(name)}/{value}/g" for name, value in values.items())
    replaces = "".join(f'.replace("{{{{{name}}}}}", "{value}")' for name, value in values.items())
    code = (
        f"import pathlib; p = pathlib.Path({json.dumps(str(path))}); "  # a JSON string is a Python literal
        f'p.write_text(p.read_text(encoding="utf-8"){replaces}, encoding="utf-8")'
    )
    python = f"python3 -c {shlex.quote(code)}"  # quoted whole: a $(...) in the file name stays text
    listed = ", ".join(f"`{{{{{name}}}}}`" for name in names)
    return (
        f"{Path(path).name} still holds template placeholders {listed}: fill them in before training, "
        "or the model learns the braces literally. Work on a copy if the file is shared (the commands "
        "change it in place), replace the YOUR_… values below (no quotes or backslashes in them, the "
        "file is JSON) and run one of:\n\n"
        f"```\nsed -i '{script}' {quoted}\n```\n\n```\n{python}\n```"
    )
