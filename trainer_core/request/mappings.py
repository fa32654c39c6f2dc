"""The text forms of a mapping field (``custom_format_mapping``, ``embedding_columns``,
``resources_per_worker``), read in one place for every door: the form's box, the API's and a YAML
file's string value, the CLI's pairs.

Three forms read the same, as the README, the field's help and the refusals write them:
``instruction=question, output=answer``, ``instruction -> question, output -> answer`` and the
JSON object ``{"instruction": "question", "output": "answer"}`` (pairs split by commas or lines).
``mapping_text`` writes a mapping in the first form: every suggestion the studio prints is written
by it, so each one reads back.
"""

from __future__ import annotations

import json
import re
from typing import Any

from trainer_core.refusals import Refusal

ARROW = re.compile(r"\s*(?:->|=>|→|=)\s*")  # our column -> the file's column; the first one splits a pair
SHAPES = {"custom_format_mapping": "our_column=file_column", "embedding_columns": "part=column"}


def shape(field: str) -> str:
    """How one pair of field ``field`` is written (``our_column=file_column``, ``name=value``)."""
    return SHAPES.get(field, "name=value")


def parse_mapping(text: str, field: str = "custom_format_mapping") -> dict[str, Any]:
    """``"a=b, c=d"``, ``"a -> b, c -> d"`` or ``'{"a": "b", "c": "d"}'`` -> ``{"a": "b", "c": "d"}``
    (a JSON object keeps its values' types: ``{"CPU": 2}``); empty text -> ``{}``. Raises a
    ``Refusal`` naming ``field`` and the pair it cannot read, with the three forms it takes."""
    text = (text or "").strip()
    forms = f"'{shape(field)}, ...', '{shape(field).replace('=', ' -> ')}, ...' or a JSON object"
    if text.startswith("{"):
        try:
            value = json.loads(text)
        except json.JSONDecodeError as exc:
            raise Refusal(f"{field}: not a JSON object ({exc.msg}); write {forms}", fields=(field,)) from None
        if not isinstance(value, dict) or not all(isinstance(k, str) and k.strip() for k in value):
            raise Refusal(f"{field}: the JSON must be an object of names, e.g. {forms}", fields=(field,))
        return {k.strip(): v.strip() if isinstance(v, str) else v for k, v in value.items()}
    mapping: dict[str, Any] = {}
    for pair in filter(None, (p.strip() for p in re.split(r"[,\n]", text))):
        ours, theirs = (ARROW.split(pair, maxsplit=1) + [""])[:2]
        if not ARROW.search(pair) or not ours.strip() or not theirs.strip():
            raise Refusal(f"{field}: '{pair}' is not '{shape(field)}'; write {forms}", fields=(field,))
        mapping[ours.strip()] = theirs.strip()
    return mapping


def mapping_text(mapping: dict[str, Any]) -> str:
    """A mapping as the form's box shows it and as suggestions print it: ``a=b, c=d`` (a float
    value without a needless ``.0``: ``CPU=1``)."""
    return ", ".join(f"{k}={v:g}" if isinstance(v, float) else f"{k}={v}" for k, v in (mapping or {}).items())


def read_text(value: Any, field: str) -> Any:
    """A mapping field's value before its type is checked: a string read by ``parse_mapping`` (an
    empty one as an empty mapping), anything else as it is. The request's ``before`` validators."""
    return parse_mapping(value, field) if isinstance(value, str) else value
