"""How many tokens a structured answer may need: the longest compact JSON a schema allows, when
the schema bounds it (every string a ``maxLength``, ``enum`` or ``const``, every array a
``maxItems``, every object closed by ``additionalProperties: false``). A structured column's
request asks for at least that many tokens, so that a constrained answer is never cut mid-JSON
(finish reason ``length``, then dropped as not JSON)."""

from __future__ import annotations

import json
from typing import Any, Optional

# A generated token carries at least one character of ordinary text; a character JSON escapes
# (\" \\ \n) or one outside ASCII may take two tokens: room for every character twice.
TOKENS_PER_CHAR = 2
NUMBER_CHARS = 24  # the longest number a JSON writer prints (-1.2345678901234567e-308)
ROOM_TOKENS = 8  # the end-of-turn token and what a server adds around the JSON


def json_chars(schema: Any) -> Optional[int]:
    """The most characters compact JSON (``json.dumps``' separators) meeting ``schema`` can have, or
    None when the schema does not bound it."""
    if not isinstance(schema, dict):
        return None
    if "const" in schema:
        return len(json.dumps(schema["const"]))
    if "enum" in schema:
        return max((len(json.dumps(v)) for v in schema["enum"]), default=None)
    if "anyOf" in schema or "oneOf" in schema:
        sizes = [json_chars(s) for s in schema.get("anyOf", schema.get("oneOf"))]
        return None if not sizes or None in sizes else max(sizes)
    kind = schema.get("type")
    if isinstance(kind, list):
        sizes = [json_chars({**schema, "type": k}) for k in kind]
        return None if not sizes or None in sizes else max(sizes)
    if kind == "string":
        return None if "maxLength" not in schema else 2 + int(schema["maxLength"])
    if kind in ("integer", "number"):
        return NUMBER_CHARS
    if kind == "boolean":
        return len("false")
    if kind == "null":
        return len("null")
    if kind == "array":
        item = json_chars(schema.get("items", {}))
        if item is None or "maxItems" not in schema:
            return None
        return 2 + int(schema["maxItems"]) * (item + len(", "))
    if kind == "object":
        if schema.get("additionalProperties", True) is not False:
            return None
        sizes = [json_chars(s) for s in schema.get("properties", {}).values()]
        if None in sizes:
            return None
        keys = sum(len(json.dumps(k)) + len(": ") + len(", ") for k in schema.get("properties", {}))
        return 2 + keys + sum(sizes)
    return None


def answer_tokens(schema: dict[str, Any]) -> Optional[int]:
    """The most tokens an answer to ``schema`` may take (``TOKENS_PER_CHAR`` a character, plus
    ``ROOM_TOKENS``), or None when the schema does not bound its size."""
    chars = json_chars(schema)
    return None if chars is None else TOKENS_PER_CHAR * chars + ROOM_TOKENS
