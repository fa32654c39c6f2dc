"""The constraint a chat request asks for, built where the model's call format is known (the worker).

``tool_choice`` ``"required"`` (some function) or ``{"type": "function", "function": {"name": ...}}``
(that one; the flat ``{"type": "function", "name": ...}`` of the Responses API too) forces one call,
written in the model's call format (``tools.parse.CONSTRAINED``: Hermes' ``<tool_call>`` block,
Mistral's ``[TOOL_CALLS][...]``, Llama 3's JSON with ``parameters``); gpt-oss' harmony names the
function outside its JSON, so a forced call is refused there. Otherwise ``response_format``
``json_object`` / ``json_schema`` constrains the text (``tools.constrain.response_constraint``).
"""

from __future__ import annotations

from typing import Any, Optional

from trainer_core.serving.errors import ChatInputError
from trainer_core.tools.constrain import Constraint, call_constraint, response_constraint
from trainer_core.tools.parse import CONSTRAINED


def forced_name(tool_choice: Any) -> tuple[bool, Optional[str]]:
    """(whether ``tool_choice`` forces a call, the function it names or None for any)."""
    if tool_choice == "required":
        return True, None
    if isinstance(tool_choice, dict):
        function = tool_choice.get("function") if isinstance(tool_choice.get("function"), dict) else tool_choice
        return True, function.get("name")
    return False, None


def request_constraint(request: dict[str, Any], fmt: str) -> Optional[Constraint]:
    """The ``Constraint`` of a worker ``request`` (its ``tools``, ``tool_choice`` and
    ``response_format``) for a model whose calls are in format ``fmt``; None for a free answer.
    Raises ChatInputError (``tool_choice``) for a forced call in a format that cannot be forced, and
    the constraint's own refusals (an unknown function, a schema that does not compile)."""
    forced, name = forced_name(request.get("tool_choice"))
    if forced and request.get("tools"):
        parts = CONSTRAINED.get(fmt)
        if parts is None:
            raise ChatInputError(
                f"tool_choice: this model writes its calls in the {fmt} format, where a call cannot be forced; send "
                "tool_choice 'auto' and read message.tool_calls",
                fields=("tool_choice",),
                code="tool_choice_not_supported",
            )
        prefix, suffix, key = parts
        return call_constraint(request["tools"], name, prefix, suffix, key)
    return response_constraint(request.get("response_format"))
