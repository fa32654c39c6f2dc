"""What every field group of the training request shares: the base class of a group, a field's
form section, and the limits of free text."""

from __future__ import annotations

from typing import Annotated, Any, Optional

from pydantic import BaseModel, ConfigDict, StringConstraints

from trainer_core.request.sections import SECTIONS

# Length limits on every free-text field: a path is at most PATH_MAX (4096) bytes on Linux; names
# and ids far less. An over-long value is a 422 naming the field, never an OSError deep inside.
MAX_PATH_CHARS = 4096
MAX_NAME_CHARS = 256
MAX_FILES = 64
PathText = Annotated[str, StringConstraints(min_length=1, max_length=MAX_PATH_CHARS)]
NameText = Annotated[str, StringConstraints(min_length=1, max_length=MAX_NAME_CHARS)]


class FieldGroup(BaseModel):
    """A group of request fields with their own field validators: a mixin of
    ``trainer_core.schemas.TrainingStartRequest``, never validated alone (no schema of its own is
    built: ``defer_build``)."""

    model_config = ConfigDict(defer_build=True)


def in_section(name: str, methods: tuple[str, ...] = (), **extra: Any) -> dict[str, Any]:
    """A field's ``json_schema_extra``: its form section (a key of ``SECTIONS``) and, for
    method-specific fields, the training methods it applies to (the form shows it only for those),
    then ``extra`` (``vision``, ``compute``, ``form``). Raises KeyError for an unknown section."""
    if name not in SECTIONS:
        raise KeyError(f"{name!r} is not a form section: one of {', '.join(SECTIONS)}")
    tag: dict[str, Any] = {"group": name, "methods": list(methods)} if methods else {"group": name}
    return {**tag, **extra}


def blank_is_none(value: Optional[str]) -> Optional[str]:
    """Blank is "not set", in every optional path and Hub part (an API body's "" included); else the
    text stripped."""
    return value.strip() if value and value.strip() else None
