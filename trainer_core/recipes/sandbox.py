"""The Jinja2 sandbox recipe templates render in, with sizes bounded. Jinja's own sandbox stops
attribute and file access but not size: ``{{ 10**100000000 }}`` holds the interpreter lock for
minutes and ``{{ "x"|center(10**10) }}`` takes 10 GB, in the server's own process for a preview.
Here a template is refused (``SecurityError``, a ``TemplateError``: the record is dropped as
``expression``) when it would build text or a list longer than ``MAX_TEXT_CHARS``, an integer
longer than ``MAX_INT_BITS``, or passes a number above ``MAX_TEXT_CHARS`` to a call or filter
(widths, counts, ``range``)."""

from __future__ import annotations

import functools
import re
from collections.abc import Callable
from typing import Any

from jinja2 import StrictUndefined
from jinja2.compiler import CodeGenerator
from jinja2.exceptions import SecurityError
from jinja2.sandbox import ImmutableSandboxedEnvironment

MAX_TEXT_CHARS = 1_000_000  # the longest text (or list) a template may build, and the largest number it may pass
MAX_INT_BITS = 4096  # the longest integer a power may make
_WIDE_FORMAT = re.compile(r"\d{7,}|\*")  # a width or precision of 7+ digits, or one taken from the arguments


def _too_big() -> SecurityError:
    return SecurityError(f"a template may build at most {MAX_TEXT_CHARS:,} characters or items")


def _check_size(value: Any) -> Any:
    if isinstance(value, (str, list, tuple)) and len(value) > MAX_TEXT_CHARS:
        raise _too_big()
    return value


def _check_numbers(values: Any) -> None:
    for value in values:
        if isinstance(value, int) and not isinstance(value, bool) and abs(value) > MAX_TEXT_CHARS:
            raise SecurityError(f"a template may pass numbers up to {MAX_TEXT_CHARS:,} to a call or filter")
        if isinstance(value, (list, tuple)) and value is not values:
            _check_numbers(value[:100])


def _check_format(text: Any) -> None:
    if isinstance(text, str) and _WIDE_FORMAT.search(text):
        raise SecurityError("a template's format string may not name a width of 7 or more digits or '*'")


def _bounded_filter(name: str, func: Callable[..., Any]) -> Callable[..., Any]:
    first = 1 if hasattr(func, "jinja_pass_arg") else 0  # filters given the context or environment first

    @functools.wraps(func)  # keeps jinja_pass_arg
    def bounded(*args: Any, **kwargs: Any) -> Any:
        _check_numbers([*args[first:], *kwargs.values()])
        if name == "join" and len(args) > first:
            if sum(len(str(item)) for item in args[first]) > MAX_TEXT_CHARS:
                raise _too_big()
        if name == "format" and len(args) > first:
            _check_format(args[first])
        return _check_size(func(*args, **kwargs))

    return bounded


class _BoundedCodeGenerator(CodeGenerator):
    """``a ~ b`` through ``environment.bounded_join`` (Jinja compiles it to a plain join)."""

    def visit_Concat(self, node: Any, frame: Any) -> None:
        self.write("environment.bounded_join((")
        for arg in node.nodes:
            self.visit(arg, frame)
            self.write(", ")
        self.write("))")


class BoundedSandbox(ImmutableSandboxedEnvironment):
    """Jinja's immutable sandbox with the sizes of what a template builds bounded (module docstring)."""

    code_generator_class = _BoundedCodeGenerator
    intercepted_binops = frozenset({"*", "**", "%", "+"})

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        self.filters = {name: _bounded_filter(name, func) for name, func in self.filters.items()}
        self.concat = self.bounded_join  # the rendered text itself

    def bounded_join(self, parts: Any) -> str:
        """The parts joined as text, refused past ``MAX_TEXT_CHARS``."""
        out, size = [], 0
        for part in parts:
            text = str(part)
            size += len(text)
            if size > MAX_TEXT_CHARS:
                raise _too_big()
            out.append(text)
        return "".join(out)

    def call_binop(self, context: Any, operator: str, left: Any, right: Any) -> Any:
        """``*``, ``**``, ``%`` and ``+`` with the sizes they would make checked first."""
        if operator == "**" and isinstance(left, int) and isinstance(right, int) and right > 0 and abs(left) > 1:
            if right * abs(left).bit_length() > MAX_INT_BITS:
                raise SecurityError(f"a template's power may make integers of at most {MAX_INT_BITS} bits")
        if operator == "*":
            for seq, times in ((left, right), (right, left)):
                if isinstance(seq, (str, list, tuple)) and isinstance(times, int) and len(seq) * times > MAX_TEXT_CHARS:
                    raise _too_big()
        if operator == "%" and isinstance(left, str):
            _check_format(left)
            _check_numbers(right if isinstance(right, (list, tuple)) else [right])
        return _check_size(self.binop_table[operator](left, right))

    def call(__self, __context: Any, __obj: Any, *args: Any, **kwargs: Any) -> Any:  # noqa: N805 - Jinja's names
        """A call from the template, its numbers bounded (``range``, ``ljust``, ``zfill``...)."""
        _check_numbers([*args, *kwargs.values()])
        return _check_size(super().call(__context, __obj, *args, **kwargs))

    def wrap_str_format(self, value: Any) -> Any:
        """Jinja's sandboxed ``str.format`` once the string's widths are checked."""
        wrapped = super().wrap_str_format(value)
        if wrapped is not None:
            _check_format(value.__self__)
        return wrapped


def sandbox() -> BoundedSandbox:
    """The environment recipe templates compile in (missing names are errors, nothing escaped)."""
    return BoundedSandbox(undefined=StrictUndefined, autoescape=False)
