"""JSON Schemas that users send (a function's ``parameters``, a structured output, a json reward):
checked once, then validated against without ever fetching or reading anything.

``schema_problem`` checks a schema against its metaschema (``jsonschema``) and refuses every ``$ref``
that points outside the schema (a URL or a file: the server must never fetch one); ``validator``
builds a validator with an empty ``referencing.Registry``, so a reference is resolved inside the
schema or not at all (``VALIDATION_ERRORS`` lists what validation can still raise).
"""

from __future__ import annotations

from typing import Any, Optional

REFERENCE_KEYS = ("$ref", "$dynamicRef", "$recursiveRef")


def schema_problem(schema: Any) -> Optional[str]:
    """None for a usable JSON Schema (an object or a boolean, valid against its metaschema, every
    reference inside it), else the problem as text (no field name: the caller adds it)."""
    import jsonschema

    if not isinstance(schema, (dict, bool)):
        return 'not a JSON schema: it must be a JSON object, e.g. {"type": "object"}'
    try:
        jsonschema.validators.validator_for(schema).check_schema(schema)
    except jsonschema.SchemaError as exc:
        return f"not a valid JSON schema ({exc.message[:200]})"
    except RecursionError:
        return "the schema nests too deeply"
    stack = [schema]
    while stack:  # no recursion: the schema may nest deeply
        node = stack.pop()
        if isinstance(node, dict):
            for key, value in node.items():
                if key in REFERENCE_KEYS and not str(value).startswith("#"):
                    return (
                        f"its {key} {str(value)[:80]!r} points outside the schema; only references inside it (#/...) "
                        "are allowed, never a URL or a file"
                    )
                stack.append(value)
        elif isinstance(node, list):
            stack.extend(node)
    return None


def validator(schema: Any) -> Any:
    """A ``jsonschema`` validator of ``schema`` (checked by ``schema_problem`` first) whose reference
    registry is empty: nothing is fetched or read to resolve a reference."""
    import jsonschema
    from referencing import Registry

    return jsonschema.validators.validator_for(schema)(schema, registry=Registry())


def validation_errors() -> tuple[type[BaseException], ...]:
    """What validating against a checked schema can still raise: an unresolvable reference, a
    recursion too deep, a value of a type the schema's keywords cannot compare."""
    from referencing.exceptions import Unresolvable

    return (Unresolvable, RecursionError, TypeError, ValueError)
