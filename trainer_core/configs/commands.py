"""The CLI command and the ``curl`` call equivalent to a set of training settings, for the
command preview under the form. Only values that differ from the schema's defaults are written
(the command stays short and reads as "what I changed"); secrets never appear: the Hugging Face
token and the API token are left to environment variables the user sets.
"""

from __future__ import annotations

import json
import shlex
import typing
from typing import Any

from pydantic import TypeAdapter, ValidationError

from trainer_core.fieldmeta import FIELDS, base_type, default, for_compute, method_default
from trainer_core.schemas import SECRET_FIELDS

PATH_FLAGS = {"local_datasets": "--dataset", "local_eval_datasets": "--eval-dataset"}  # repeated flags in cli.py


def changed_settings(settings: dict[str, Any]) -> dict[str, Any]:
    """The entries of ``settings`` (JSON-able field values) that differ from the defaults (the
    training method's own, ``METHOD_DEFAULTS``, where it has one: a GRPO run's beta 0.1 is written,
    its 0.04 is not), in the schema's order; secrets, unknown keys, empty reward lists and the
    settings of another compute (a local run's Ray settings) left out. A mapping typed on the form
    (``CPU=1``: the text "1") is compared and written with its values as the field's type (1.0)."""
    method = str(settings.get("training_method") or "sft")
    compute = str(settings.get("compute") or default("compute"))
    typed = {name: _typed(name, settings[name]) for name in FIELDS if name in settings}
    return {
        name: value
        for name, value in typed.items()
        if name not in SECRET_FIELDS
        and value != method_default(name, method)
        and not (name == "rewards" and not value)
        and for_compute(name) in (None, compute)
    }


def _typed(name: str, value: Any) -> Any:
    """A mapping field's value with its values read as the field says (the form's ``a=b`` text
    gives strings); anything else, or a mapping that does not read, as it is."""
    annotation = FIELDS[name].annotation
    if not isinstance(value, dict) or typing.get_origin(base_type(annotation)) is not dict:
        return value
    try:
        return TypeAdapter(annotation).validate_python(value)
    except ValidationError:
        return value


def cli_command(settings: dict[str, Any]) -> str:
    """``python -m trainer_core train ...`` with a flag per changed setting (``--dataset`` per
    training file, ``--flag`` / ``--no-flag`` for booleans, space-separated lists, ``a=b`` pairs
    for the column mapping), shell-quoted, one flag per continued line."""
    parts = ["python -m trainer_core train"]
    for name, value in changed_settings(settings).items():
        if name in PATH_FLAGS:
            parts += [f"{PATH_FLAGS[name]} {shlex.quote(str(path))}" for path in value]
            continue
        flag = "--" + name.replace("_", "-")
        kind = base_type(FIELDS[name].annotation)
        if kind is bool:
            parts.append(flag if value else f"--no-{flag[2:]}")
        elif value is None:
            continue  # an optional text left empty is the default's meaning
        elif typing.get_origin(kind) is dict:
            parts.append(f"{flag} " + " ".join(shlex.quote(f"{k}={v}") for k, v in value.items()))
        elif typing.get_origin(kind) is list:  # a reward given as an object: its JSON (the CLI reads both)
            items = (json.dumps(v) if isinstance(v, dict) else str(v) for v in value)
            parts.append(f"{flag} " + " ".join(shlex.quote(item) for item in items))
        else:
            parts.append(f"{flag} {shlex.quote(str(value))}")
    return " \\\n  ".join(parts)


def curl_command(settings: dict[str, Any], base_url: str, needs_token: bool, has_hf_token: bool = False) -> str:
    """A ``curl`` POST of the changed settings to ``{base_url}/api/train/start`` (the API's
    defaults are the same schema's). With ``needs_token`` the ``Authorization`` header reads the
    token from ``$STUDIO_API_TOKEN``; with ``has_hf_token`` a comment line says the Hugging Face
    token was left out. Neither secret is ever written here."""
    body = json.dumps(changed_settings(settings), indent=2)
    lines = [
        f"curl -X POST {shlex.quote(base_url.rstrip('/') + '/api/train/start')}",
        "-H 'Content-Type: application/json'",
    ]
    if needs_token:
        lines.append('-H "Authorization: Bearer $STUDIO_API_TOKEN"')
    lines.append(f"-d {shlex.quote(body)}")
    head = '# the Hugging Face token is left out: add "hf_token": "..." to the JSON body\n' if has_hf_token else ""
    return head + " \\\n  ".join(lines)
