"""Refusals as data: ``Refusal``, the one error type every door's "no" is raised as.

A refusal is a ``ValueError`` whose message names the setting and the fix (``str(exc)``), with
``fields``, the request fields it concerns (schema names such as ``("output_dir",)`` or
``("lora_r", "lora_alpha")``, possibly none: the page marks their widgets), a stable snake_case
``code`` (``path_not_allowed``, ``missing_files``, ...) and ``status``, the HTTP status the API
answers it with (400 a request that cannot be used, 404 an unknown id, 409 busy, 422 a value the
schema refuses). Each refusal class of the engine is a subclass that sets its own code; a raise
names its fields.

A pydantic ``ValidationError`` is a refusal too at the doors (``from_validation``): its fields come
from each error's location (``loc``) and from a ``Refusal`` raised inside a validator, its code is
``invalid_setting`` (or that inner refusal's code, per error: ``error_code``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Optional

from pydantic import ValidationError

INVALID_SETTING = "invalid_setting"  # a value the request schema refuses (HTTP 422 at the API)
LOCATIONS = ("body", "query", "path", "header", "cookie")  # FastAPI's first ``loc`` part


class Refusal(ValueError):
    """A request refused before anything ran; the message names the field and the fix.

    ``fields``: the request fields it concerns (the page marks them; may be empty). ``code``: a
    stable snake_case id (a class sets its own; a raise may give a finer one). ``status``: the HTTP
    status that fits (class default 400)."""

    code: str = INVALID_SETTING
    status: int = 400

    def __init__(
        self,
        message: str = "",
        *,
        fields: Iterable[str] = (),
        code: Optional[str] = None,
        status: Optional[int] = None,
    ) -> None:
        super().__init__(message)
        self.fields: tuple[str, ...] = tuple(dict.fromkeys(fields))
        if code is not None:
            self.code = code
        if status is not None:
            self.status = status

    @property
    def message(self) -> str:
        """The message (``str(self)``)."""
        return str(self)


def _inner(error: Mapping[str, Any]) -> Optional[Refusal]:
    """The ``Refusal`` a validator raised for pydantic error ``error`` (pydantic keeps it in
    ``ctx["error"]``), or None."""
    inner = (error.get("ctx") or {}).get("error")
    return inner if isinstance(inner, Refusal) else None


def error_fields(error: Mapping[str, Any]) -> tuple[str, ...]:
    """The request fields one pydantic error (an item of ``ValidationError.errors()``, or of
    FastAPI's ``RequestValidationError.errors()``) concerns: the top field of its ``loc`` (after
    FastAPI's ``body`` / ``query`` part), then the fields of a ``Refusal`` raised in the validator."""
    loc = list(error.get("loc") or ())
    if len(loc) > 1 and loc[0] in LOCATIONS:
        loc = loc[1:]
    top = [loc[0]] if loc and isinstance(loc[0], str) and loc != ["body"] else []  # ["body"]: the whole body
    inner = _inner(error)
    return tuple(dict.fromkeys([*top, *(inner.fields if inner else ())]))


def error_code(error: Mapping[str, Any]) -> str:
    """The code of one pydantic error: that of a ``Refusal`` raised in the validator, else
    ``invalid_setting``."""
    inner = _inner(error)
    return inner.code if inner is not None else INVALID_SETTING


def explain(error: ValidationError) -> str:
    """All problems on one line, each as ``field: message`` (no pydantic boilerplate); a problem of
    the whole request is ``settings: message``."""
    lines = []
    for item in error.errors():
        field = ".".join(str(p) for p in item["loc"]) or "settings"
        lines.append(f"{field}: {item['msg'].removeprefix('Value error, ')}")
    return "; ".join(lines)


def validation_fields(error: ValidationError) -> tuple[str, ...]:
    """The request fields of every problem in ``error`` (``error_fields``), in order, once each."""
    return tuple(dict.fromkeys(name for item in error.errors() for name in error_fields(item)))


def from_validation(error: ValidationError) -> Refusal:
    """``error`` as a refusal: ``explain``'s message, ``validation_fields``, code ``invalid_setting``
    and status 422."""
    return Refusal(explain(error), fields=validation_fields(error), code=INVALID_SETTING, status=422)


def as_refusal(error: BaseException) -> Optional[Refusal]:
    """``error`` as a refusal when it is one (itself) or a validation error (``from_validation``);
    None for anything else."""
    if isinstance(error, Refusal):
        return error
    if isinstance(error, ValidationError):
        return from_validation(error)
    return None


__all__ = [
    "INVALID_SETTING",
    "Refusal",
    "as_refusal",
    "error_code",
    "error_fields",
    "explain",
    "from_validation",
    "validation_fields",
]
