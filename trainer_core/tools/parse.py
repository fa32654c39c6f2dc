"""Function calls read back out of a model's answer, in the call format of its family.

``call_format`` finds the format from the chat template's text (the template writes the calls it was
trained on, so it names the format); a template without tools gets ``render.FALLBACK_FORMAT``, what the
tools fallback trains. ``parse_calls(text, fmt)`` returns the answer's text and its calls in OpenAI's
``tool_calls`` shape: ``{"id": "call_...", "type": "function", "function": {"name", "arguments"}}``
with ``arguments`` a JSON string. A call that does not parse leaves the whole answer as text with no
calls: a client gets what the model wrote, never an exception. ``CallSplitter`` does the same for a
streamed answer: text passes through until a call starts, the rest is held and parsed at the end.

Formats (``FORMATS``):

- ``hermes``: Qwen 2.5 / Hermes ``<tool_call>\\n{"name": ..., "arguments": {...}}\\n</tool_call>``,
  one block per call;
- ``llama3``: Llama 3.x, the whole answer one JSON ``{"name": ..., "parameters": {...}}`` (several
  separated by ``;``), optionally after ``<|python_tag|>``;
- ``mistral``: ``[TOOL_CALLS][{"name": ..., "arguments": {...}}, ...]`` (and the newer
  ``[TOOL_CALLS]name[ARGS]{...}``);
- ``harmony``: gpt-oss ``<|start|>assistant to=functions.NAME<|channel|>commentary json<|message|>
  {...}<|call|>``.
"""

from __future__ import annotations

import json
import re
import secrets
from collections.abc import Callable, Collection
from typing import Any, Optional

from trainer_core.tools.definitions import NAME, ToolsError, parsed_arguments
from trainer_core.tools.render import FALLBACK_FORMAT, split_calls, template_text

FORMATS = ("hermes", "llama3", "mistral", "harmony")
STARTS = {  # the texts with which a call begins, per format (where it may begin: see CallSplitter)
    "hermes": ("<tool_call>",),
    "llama3": ("<|python_tag|>", "{"),
    "mistral": ("[TOOL_CALLS]",),
    "harmony": ("to=functions.",),
}
CONSTRAINED = {  # format -> (text before the call's JSON, text after it, the arguments' key) for a forced call
    "hermes": ("<tool_call>\n", "\n</tool_call>", "arguments"),
    "mistral": ("[TOOL_CALLS][", "]", "arguments"),
    "llama3": ("", "", "parameters"),
}  # harmony names the function outside its JSON: a forced call is not offered there
_HARMONY_CALL = re.compile(
    r"to=functions\.([^\s<]+)(?:<\|channel\|>[^<]*|\s+[^<]*)?<\|message\|>(.*?)(?:<\|call\|>|<\|end\|>|$)", re.DOTALL
)
_HARMONY_TOKENS = re.compile(r"<\|(?:start|end|channel|message|call|return|constrain)\|>")
_MISTRAL_NAMED = re.compile(r"\[TOOL_CALLS\]\s*([A-Za-z0-9_.:-]+)\s*\[ARGS\]")


def call_format(tokenizer_or_template: Any) -> str:
    """The call format (one of ``FORMATS``) of a tokenizer's chat template, or of a template's text;
    ``render.FALLBACK_FORMAT`` for a template that names none of them (no tools in it)."""
    text = tokenizer_or_template if isinstance(tokenizer_or_template, str) else template_text(tokenizer_or_template)
    if "to=functions." in text or "<|channel|>" in text:
        return "harmony"
    if "[TOOL_CALLS]" in text:
        return "mistral"
    if "<tool_call>" in text:
        return "hermes"
    if "<|python_tag|>" in text or ('"parameters"' in text and "<|eot_id|>" in text):
        return "llama3"
    return FALLBACK_FORMAT


def openai_call(name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    """One call in OpenAI's ``tool_calls`` shape, with a fresh ``call_`` id (24 hex digits)."""
    return {
        "id": "call_" + secrets.token_hex(12),
        "type": "function",
        "function": {"name": name, "arguments": json.dumps(arguments, ensure_ascii=False)},
    }


def parse_calls(text: str, fmt: str) -> tuple[str, list[dict[str, Any]]]:
    """(content, calls) of an answer in format ``fmt``: the text before the first call (stripped;
    the whole text when there are no calls) and the calls as ``openai_call``'s. A call that does not
    parse (bad JSON, no name, arguments not an object, unclosed) gives ``(text, [])``."""
    reader = _READERS.get(fmt, _READERS[FALLBACK_FORMAT])
    try:
        found = reader(text)
    except (ToolsError, ValueError, TypeError, KeyError):
        return text, []
    if found is None:
        return text, []
    content, calls = found
    return content, [openai_call(name, arguments) for name, arguments in calls]


def call_start(text: str, fmt: str) -> Optional[int]:
    """Where the first call of format ``fmt`` begins in ``text`` (None: no call begun), parsed or
    not: an evaluation counts an answer that began a call as an attempt. Llama 3's bare ``{`` counts
    only at the start of the answer."""
    starts = STARTS.get(fmt, STARTS[FALLBACK_FORMAT])
    spots = [text.find(s) for s in starts if s != "{"]
    if "{" in starts and text.lstrip().startswith("{"):
        spots.append(len(text) - len(text.lstrip()))
    spots = [spot for spot in spots if spot >= 0]
    return min(spots) if spots else None


Calls = Optional[tuple[str, list[tuple[str, dict[str, Any]]]]]  # (content, [(name, arguments)]) or None


def _named(call: Any) -> tuple[str, dict[str, Any]]:
    """(name, arguments) of a ``{"name", "arguments" | "parameters"}`` object; ValueError otherwise."""
    if not isinstance(call, dict) or not isinstance(call.get("name"), str) or not NAME.match(call["name"]):
        raise ValueError("not a call")
    return call["name"], parsed_arguments(call.get("arguments", call.get("parameters")))


def _hermes(text: str) -> Calls:
    if "<tool_call>" not in text:
        return None
    content, calls = split_calls(text)
    if len(calls) != text.count("<tool_call>"):  # an unclosed block: the answer was cut
        raise ValueError("unclosed call")
    return content, [(c["name"], c["arguments"]) for c in calls]


def _llama3(text: str) -> Calls:
    body = text.strip()
    content, tagged, after = body.partition("<|python_tag|>")
    if tagged:
        body = after.strip()
    elif not body.startswith("{"):
        return None
    decoder, calls, at = json.JSONDecoder(), [], 0
    while at < len(body):
        value, at = decoder.raw_decode(body, at)
        calls.append(_named(value))
        at = len(body) - len(body[at:].lstrip().lstrip(";").lstrip())
    if not calls:
        raise ValueError("no call")
    return content.strip() if tagged else "", calls


def _mistral(text: str) -> Calls:
    content, marker, rest = text.partition("[TOOL_CALLS]")
    if not marker:
        return None
    if _MISTRAL_NAMED.search(text):  # [TOOL_CALLS]name[ARGS]{...}, repeated
        decoder, calls = json.JSONDecoder(), []
        for match in _MISTRAL_NAMED.finditer(text):
            arguments, _ = decoder.raw_decode(text, match.end())
            calls.append((match.group(1), parsed_arguments(arguments)))
        return content.strip(), calls
    value, end = json.JSONDecoder().raw_decode(rest.strip())
    value = value if isinstance(value, list) else [value]
    if not value or rest.strip()[end:].strip().removesuffix("</s>").strip():
        raise ValueError("text after the calls")
    return content.strip(), [_named(call) for call in value]


def _harmony(text: str) -> Calls:
    matches = list(_HARMONY_CALL.finditer(text))
    if not matches:
        return None
    calls = []
    for match in matches:
        if not NAME.match(match.group(1)) or "<|call|>" not in text[match.start() :]:
            raise ValueError("not a call")
        calls.append((match.group(1), parsed_arguments(match.group(2).strip())))
    head = text[: matches[0].start()]
    final = head.rsplit("<|message|>", 1)[-1] if "final" in head else ""
    return _HARMONY_TOKENS.sub("", final).strip(), calls


_READERS: dict[str, Callable[[str], Calls]] = {
    "hermes": _hermes,
    "llama3": _llama3,
    "mistral": _mistral,
    "harmony": _harmony,
}


class CallSplitter:
    """A streamed answer's text passed on to ``on_text`` until a call of format ``fmt`` starts;
    from there it is held. ``finish()`` parses the whole answer: its calls (``openai_call``'s), or
    [] after sending the held text on (a call that did not parse stays text). Text that may be the
    beginning of a call's start (``<tool_c``) waits for the next piece."""

    def __init__(self, fmt: str, on_text: Callable[[str], None]) -> None:
        self.fmt, self.on_text = fmt, on_text
        self.starts = STARTS.get(fmt, STARTS[FALLBACK_FORMAT])
        self.text, self.sent = "", 0  # the whole answer so far; characters of it passed on
        self.holding = False

    def feed(self, piece: str) -> None:
        """Take the next piece of the answer."""
        self.text += piece
        if self.holding:
            return
        start = call_start(self.text, self.fmt)
        if start is not None:
            self.holding = True
            self._send(start)
            return
        keep = max((n for s in self.starts for n in range(1, len(s)) if self.text.endswith(s[:n])), default=0)
        if not self.text.strip():
            keep = len(self.text)  # leading blanks: Llama 3's "{" may follow
        self._send(len(self.text) - keep)

    def _send(self, upto: int) -> None:
        if upto > self.sent:
            self.on_text(self.text[self.sent : upto])
            self.sent = upto

    def finish(self, known: Optional[Collection[str]] = None) -> list[dict[str, Any]]:
        """The answer's calls; with none, the text still held is sent on first. ``known``: the
        functions offered; a call of any other leaves the answer as text (a client could not run it)."""
        _, calls = parse_calls(self.text, self.fmt) if self.holding else ("", [])
        if known is not None and any(call["function"]["name"] not in known for call in calls):
            calls = []
        if not calls:
            self._send(len(self.text))
        return calls
