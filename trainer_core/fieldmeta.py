"""Reading ``TrainingStartRequest``'s field metadata, for the UI's widgets and the CLI's flags."""

from __future__ import annotations

import enum
import types
import typing
from typing import Any, Optional

from pydantic.fields import FieldInfo

from trainer_core.schemas import TrainingStartRequest
from trainer_core.vocabulary import METHOD_DEFAULTS

FIELDS: dict[str, FieldInfo] = TrainingStartRequest.model_fields


def base_type(annotation: Any) -> Any:
    """``Optional[X]`` -> ``X``; anything else unchanged."""
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        return next(a for a in typing.get_args(annotation) if a is not type(None))
    return annotation


def choices(annotation: Any) -> Optional[list[str]]:
    """The allowed values of an Enum or Literal type; None for free values."""
    annotation = base_type(annotation)
    if isinstance(annotation, type) and issubclass(annotation, enum.Enum):
        return [m.value for m in annotation]
    if typing.get_origin(annotation) is typing.Literal:
        return list(typing.get_args(annotation))
    return None


def bounds(info: FieldInfo) -> dict[str, float]:
    """``{"minimum": .., "maximum": ..}`` from the field's ge/gt/le/lt constraints."""
    found: dict[str, float] = {}
    for meta in info.metadata:
        for attr, key in (("ge", "minimum"), ("gt", "minimum"), ("le", "maximum"), ("lt", "maximum")):
            if getattr(meta, attr, None) is not None:
                found[key] = getattr(meta, attr)
    return found


def group(name: str) -> str:
    """The form section of field ``name`` (a key of ``request.sections.SECTIONS``)."""
    return (FIELDS[name].json_schema_extra or {}).get("group", "training")


def field_methods(name: str) -> list[str]:
    """The training methods field ``name`` applies to (empty: every method)."""
    return list((FIELDS[name].json_schema_extra or {}).get("methods", []))


def for_vision(name: str) -> bool:
    """True for the fields that apply to vision-language models only (``vision`` in their metadata:
    the form shows them only when the chosen model reads images)."""
    return bool((FIELDS[name].json_schema_extra or {}).get("vision"))


def for_embedding(name: str) -> bool:
    """True for the fields that apply to embedding models only (``embedding`` in their metadata: the
    form shows them only when the chosen model is an embedder or is_embedding is on)."""
    return bool((FIELDS[name].json_schema_extra or {}).get("embedding"))


def for_compute(name: str) -> Optional[str]:
    """The ``compute`` value field ``name`` applies to alone (``"ray"`` for the Ray settings: the form
    shows them only then), or None for a field of every compute."""
    return (FIELDS[name].json_schema_extra or {}).get("compute")


def default(name: str) -> Any:
    """The field's default value, with enum members as their plain values."""
    value = FIELDS[name].get_default(call_default_factory=True)
    return value.value if isinstance(value, enum.Enum) else value


def method_default(name: str, method: str) -> Any:
    """Field ``name``'s default in a run of training ``method`` (a method value such as ``"grpo"``):
    the method's own (``vocabulary.METHOD_DEFAULTS``: what the request applies when the field is not
    set), else the field's. The form's method panel and the command preview compare against it."""
    return METHOD_DEFAULTS.get((name, method), default(name))
