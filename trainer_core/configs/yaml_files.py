"""A training request as a YAML file and back: the keys are ``TrainingStartRequest``'s field names,
the same keys ``python -m trainer_core train --config FILE`` reads. Secrets (``hf_token``, ``wandb_token``) are never
written, and a file that holds one is read without it.
"""

from __future__ import annotations

import difflib
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from trainer_core.fieldmeta import FIELDS, group
from trainer_core.refusals import Refusal, error_code, explain, validation_fields
from trainer_core.request.sections import SECTIONS
from trainer_core.schemas import SECRET_FIELDS, TrainingStartRequest

SECRET_HINTS = {
    "hf_token": "type it in the form",
    "wandb_token": "the server's own wandb login (WANDB_API_KEY) is used",
}
MAX_CONFIG_BYTES = 256 * 1024  # a settings file is a few KB; anything far larger is not one
NO_DATA = "no_training_data"  # the code of the one check a settings file without datasets may fail


class ConfigFileError(Refusal):
    """A settings file that cannot be used; the message names the file, the key and the fix, and
    ``fields`` the settings the schema refused."""

    code = "config_file_invalid"


def request_to_yaml(settings: dict[str, Any]) -> str:
    """YAML text for ``settings`` (``TrainingStartRequest.public_dict()`` or any subset of field
    values): every field in the schema's order, one commented block per form section, secrets left
    out. ``yaml.safe_load`` of the text gives back the same values."""
    blocks = [
        "# Finetune Studio training settings: load them in the Train tab, or run\n"
        "#   python -m trainer_core train --config THIS_FILE\n"
    ]
    for key, section in SECTIONS.items():
        values = {
            name: settings[name]
            for name in FIELDS
            if group(name) == key and name in settings and name not in SECRET_FIELDS
        }
        if values:
            blocks.append(
                f"# --- {section.title} ---\n"
                + yaml.safe_dump(values, sort_keys=False, allow_unicode=True, default_flow_style=False)
            )
    return "\n".join(blocks)


def read_config_file(path: Path, keep_secrets: bool = False) -> tuple[dict[str, Any], list[str]]:
    """``parse_config_text`` of the file at ``path`` (UTF-8, at most MAX_CONFIG_BYTES). Raises
    ConfigFileError naming the file when it cannot be read, is too large or is not UTF-8."""
    path = Path(path)
    try:
        if path.stat().st_size > MAX_CONFIG_BYTES:
            raise ConfigFileError(f"{path} is larger than {MAX_CONFIG_BYTES // 1024} KB: it is not a settings file")
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise ConfigFileError(f"{path} is not UTF-8 text: save it as UTF-8") from None
    except OSError as exc:
        raise ConfigFileError(f"{path} cannot be read ({exc.strerror or exc}): check the path") from None
    return parse_config_text(text, str(path), keep_secrets)


def parse_config_text(
    text: str, source: str = "the settings file", keep_secrets: bool = False
) -> tuple[dict[str, Any], list[str]]:
    """The field values in YAML ``text`` and notes for the user (secrets skipped). The values are
    checked with ``TrainingStartRequest``: a file without datasets is accepted (the form or
    ``--dataset`` supplies them), anything else invalid is refused. ``keep_secrets`` (the CLI,
    reading the user's own file) keeps the secrets (``SECRET_FIELDS``); the page never takes one from a file.

    Raises ConfigFileError naming ``source`` for text that is not YAML, not a mapping, has keys that
    are not settings (with the nearest key name), or values the schema refuses (naming the field)."""
    if len(text.encode("utf-8", "replace")) > MAX_CONFIG_BYTES:
        raise ConfigFileError(f"{source} is larger than {MAX_CONFIG_BYTES // 1024} KB: it is not a settings file")
    try:
        values = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ConfigFileError(f"{source} is not valid YAML ({_first_line(exc)}): fix the line it names") from None
    except (RecursionError, ValueError) as exc:  # nested deeper than Python allows; an integer of thousands of digits
        raise ConfigFileError(
            f"{source} cannot be read as settings ({type(exc).__name__}: {_first_line(exc)[:120]}): "
            "it is not a settings file"
        ) from None
    if values is None:
        values = {}
    if not isinstance(values, dict):
        raise ConfigFileError(
            f"{source} must be a mapping of settings (key: value per line), not a {type(values).__name__}"
        )
    unknown = [str(key) for key in values if key not in FIELDS]
    if unknown:
        hints = [
            f"'{k}'" + (f" (did you mean '{m[0]}'?)" if (m := difflib.get_close_matches(k, FIELDS, 1)) else "")
            for k in unknown[:5]
        ]
        raise ConfigFileError(
            f"{source}: {', '.join(hints)} {'is' if len(unknown) == 1 else 'are'} not a setting; "
            "use the keys of a saved settings file"
        )
    if not keep_secrets:
        notes = [f"{name} is not read from files: {SECRET_HINTS[name]}" for name in SECRET_FIELDS if name in values]
        values = {key: value for key, value in values.items() if key not in SECRET_FIELDS}
    else:
        notes = []
    try:
        TrainingStartRequest(**values)
    except (RecursionError, ValueError) as exc:
        if not isinstance(exc, ValidationError):
            raise ConfigFileError(
                f"{source} cannot be read as settings ({type(exc).__name__}): it is not a settings file"
            ) from None
        problems = [e for e in exc.errors() if error_code(e) != NO_DATA]
        if problems:
            refused = ValidationError.from_exception_data(exc.title, problems)
            raise ConfigFileError(f"{source}: {explain(refused)}", fields=validation_fields(refused)) from None
    return values, notes


def _first_line(exc: Exception) -> str:
    return " ".join(str(exc).split())[:200]
