"""Function tools as OpenAI defines them: one normal form, and a call's arguments checked against it.

A tool is ``{"type": "function", "function": {"name", "description", "parameters"}}``, OpenAI's
chat-completions form (https://platform.openai.com/docs/guides/function-calling), which is also what
``apply_chat_template(..., tools=...)`` takes. Data brings tools as JSON text or a list, often bare
(``{"name", "description", "parameters"}``: glaive / LLaMA-Factory rows); ``tool_list`` turns every
shape into the one form. ``argument_errors`` validates a call's arguments against the function's
``parameters`` (a JSON Schema, checked by ``json_schema.schema_problem``) with ``jsonschema``.
"""

from __future__ import annotations

import json
import re
from typing import Any, Optional

from trainer_core.tools.json_schema import schema_problem, validation_errors, validator

NAME = re.compile(r"^[A-Za-z0-9_.:-]{1,64}$")  # OpenAI: letters, digits, _ and -, at most 64 (we allow . and :)
MAX_TOOLS = 128  # OpenAI's limit on the functions of one request
TOOL_CHOICES = ("auto", "none", "required")  # tool_choice's words (a named function is an object)


class ToolsError(ValueError):
    """A ``tools`` value or a call that cannot be used; the message starts with ``where`` (the field,
    e.g. ``tools[2].function.name``) and says how to fix it."""

    def __init__(self, where: str, problem: str) -> None:
        super().__init__(f"{where}: {problem}")
        self.where = where


def tool_list(value: Any, where: str = "tools") -> list[dict[str, Any]]:
    """``value`` (None, '', JSON text, one tool or a list of tools, each wrapped or bare) as a list of
    ``{"type": "function", "function": {"name", "description", "parameters"}}`` ([] for none).
    Raises ToolsError naming ``where[i]`` for bad JSON, a tool that is not a function, a missing or
    malformed name, parameters that are not a JSON Schema object, a repeated name or too many tools."""
    if isinstance(value, str):
        if not value.strip():
            return []
        try:
            value = json.loads(value)
        except json.JSONDecodeError as exc:
            raise ToolsError(
                where, f"not valid JSON ({exc.msg} at column {exc.colno}): fix it or leave it empty"
            ) from None
    if value is None or value == []:
        return []
    value = [value] if isinstance(value, dict) else value
    if not isinstance(value, list):
        raise ToolsError(where, f"a {type(value).__name__}: give a list of function definitions (or its JSON text)")
    if len(value) > MAX_TOOLS:
        raise ToolsError(where, f"{len(value)} tools: at most {MAX_TOOLS} are supported")
    tools = [_tool(tool, f"{where}[{i}]") for i, tool in enumerate(value)]
    names = [tool["function"]["name"] for tool in tools]
    for i, name in enumerate(names):
        if name in names[:i]:
            raise ToolsError(
                f"{where}[{i}].function.name", f"{name!r} is defined twice: give each function its own name"
            )
    return tools


def _tool(tool: Any, where: str) -> dict[str, Any]:
    """One tool in the normal form (see ``tool_list``)."""
    if not isinstance(tool, dict):
        raise ToolsError(where, f"a {type(tool).__name__}: each tool is an object")
    if "function" in tool or "type" in tool:
        if tool.get("type", "function") != "function":
            raise ToolsError(f"{where}.type", f"{str(tool.get('type'))[:40]!r}: only function tools are supported")
        function, where = tool.get("function"), f"{where}.function"
        if not isinstance(function, dict):
            raise ToolsError(where, 'missing: give {"name": ..., "parameters": {...}}')
    else:
        function = tool  # bare: {"name", "description", "parameters"}
    name = function.get("name")
    if not isinstance(name, str) or not NAME.match(name):
        raise ToolsError(
            f"{where}.name", f"{str(name)[:70]!r} is not a function name: use letters, digits, _ and -, at most 64"
        )
    parameters = function.get("parameters")
    if parameters is None:
        parameters = {"type": "object", "properties": {}}
    if not isinstance(parameters, dict) or parameters.get("type", "object") != "object":
        raise ToolsError(
            f"{where}.parameters", 'not a JSON Schema object: give {"type": "object", "properties": {...}}'
        )
    problem = schema_problem(parameters)
    if problem is not None:
        raise ToolsError(f"{where}.parameters", problem)
    description = function.get("description")
    out: dict[str, Any] = {"name": name}
    if isinstance(description, str) and description:
        out["description"] = description
    out["parameters"] = parameters
    return {"type": "function", "function": out}


def functions(tools: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Name -> function object of ``tool_list``'s output."""
    return {tool["function"]["name"]: tool["function"] for tool in tools}


def parsed_arguments(arguments: Any, where: str = "arguments") -> dict[str, Any]:
    """A call's arguments as a dict: a dict as is, JSON text parsed ('' and None: {}). Raises
    ToolsError naming ``where`` when the text is not JSON or not an object."""
    if arguments is None or (isinstance(arguments, str) and not arguments.strip()):
        return {}
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments)
        except json.JSONDecodeError as exc:
            raise ToolsError(where, f"not valid JSON ({exc.msg} at column {exc.colno})") from None
    if not isinstance(arguments, dict):
        raise ToolsError(where, f"a {type(arguments).__name__}: the arguments of a call are a JSON object")
    return arguments


def argument_errors(function: dict[str, Any], arguments: Any) -> Optional[str]:
    """None when ``arguments`` (a dict) is valid against ``function["parameters"]``, else the first
    problem as text, with the path of the value it concerns."""
    import jsonschema

    try:
        error = jsonschema.exceptions.best_match(validator(function.get("parameters") or True).iter_errors(arguments))
    except validation_errors() as exc:
        return f"arguments: cannot be checked against the schema ({type(exc).__name__})"
    if error is None:
        return None
    path = "".join(f"[{p!r}]" if isinstance(p, str) else f"[{p}]" for p in error.absolute_path)
    return f"arguments{path}: {error.message}"
