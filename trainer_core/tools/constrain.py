"""Constrained decoding: the answer is exactly ``prefix`` + JSON matching a schema + ``suffix``, then
the end-of-turn token, enforced token by token through llguidance (issue 50).

llguidance was chosen by measurement (bench/constrained.py, docs/BENCHMARKS.md): on SmolLM2-135M
its mask costs ~0.05-0.1 ms a token against ~65 ms a token of CPU decoding, it compiles a tool
call's grammar in ~4-17 ms and it needs no other package. xgrammar's mask is cheaper still (~0.004
ms) but it requires triton (a 286 MB wheel) and apache-tvm-ffi; outlines-core (~0.003 ms) turns the
schema into one regex, compiled ~35x slower and let whitespace vary. All three cost far below the
noise of the model's own step; the mask's application here (numpy) is ~0.2 ms a token.

For the OpenAI routes (``tools`` / ``tool_choice`` / ``response_format``), the functions to call:

- ``call_schema(tools, name=None) -> dict``: the JSON schema of ONE call object ``{"name": <const>,
  "arguments": <the function's parameters>}`` of ``tools`` (OpenAI ``[{"type": "function",
  "function": {"name", "parameters"}}]``, the form ``tools.definitions.tool_list`` gives: check the
  schemas there first, ``json_schema.schema_problem``), ``anyOf`` over the functions when ``name``
  is None.
  Raises ``SchemaNotSupported`` (``tools[i].function.parameters``) for a schema llguidance cannot
  compile and ``Refusal`` (``tool_choice``) for a name that no function has.
- ``response_schema(response_format) -> dict | None``: ``{"type": "json_object"}`` gives
  ``JSON_OBJECT`` (any object), ``{"type": "json_schema", "json_schema": {"schema": ...}}`` that
  schema, ``{"type": "text"}`` or None gives None (free text). Raises ``SchemaNotSupported``
  (``response_format.json_schema``).
- ``Constraint(schema, prefix="", suffix="", field=...)``: what to enforce; built only through
  ``call_constraint`` / ``response_constraint`` or after ``check_schema``. Pass it to
  ``serving.generate.generate(..., constraint=...)``, which calls ``constraint.processor(tokenizer,
  stop_ids)`` once per generation (a processor holds one generation's state). ``call_constraint(tools,
  name, prefix, suffix)`` wraps ``call_schema``: e.g. the Hermes format's ``"<tool_call>\\n"`` and
  ``"\\n</tool_call>"``.
- A GGUF served by llama.cpp: send the constraint as ``dataclasses.asdict(constraint)`` in the
  worker request's ``"constraint"``; ``serving.gguf_worker.generate`` enforces it with
  ``tools.constrain_gguf.LlamaCppConstraint`` (the same llguidance grammar).

A generation that reaches ``max_new_tokens`` before the JSON closes ends with finish reason
``length`` (``generate`` reads ``JsonConstraintProcessor.accepted``). The JSON is compact (``", "``
and ``": "`` separators, no newlines), as ``json.dumps`` writes it.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Optional

from trainer_core.refusals import Refusal

log = logging.getLogger(__name__)

JSON_OBJECT: dict[str, Any] = {"type": "object"}  # response_format {"type": "json_object"}: any object
COMPACT = {"whitespace_flexible": False, "item_separator": ", ", "key_separator": ": "}  # json.dumps' layout
CACHE_SIZE = 64  # compiled grammars kept (per process), least recently used dropped first
RESPONSE_FIELD = "response_format.json_schema"


class SchemaNotSupported(Refusal):
    """A JSON schema the grammar library cannot compile (unknown type, unsatisfiable bounds, a
    remote ``$ref``, a look-around pattern, ...); ``fields`` names where the schema came from."""

    code = "schema_not_supported"


def _grammar(schema: dict[str, Any], prefix: str, suffix: str) -> str:
    """The llguidance grammar (Lark with an embedded ``%json`` schema) of prefix + JSON + suffix."""
    import llguidance

    schema = {**schema, "x-guidance": COMPACT}
    lark = f"start: {json.dumps(prefix)} value {json.dumps(suffix)}\nvalue: %json {json.dumps(schema)}\n"
    if not prefix and not suffix:
        lark = f"start: value\nvalue: %json {json.dumps(schema)}\n"
    return llguidance.LLMatcher.grammar_from_lark(lark)


def check_schema(schema: Any, field: str) -> None:
    """Raise ``SchemaNotSupported`` naming ``field`` unless ``schema`` is a JSON object that
    llguidance compiles (a check without a tokenizer: ~1 ms)."""
    import llguidance

    if not isinstance(schema, dict):
        raise SchemaNotSupported(f"{field}: a JSON schema is an object, not {type(schema).__name__}", fields=(field,))
    error = llguidance.LLMatcher.validate_grammar(_grammar(schema, "", ""))
    if error:
        reason = error.split("failed to compile JSON schema: ", 1)[-1].splitlines()[0]
        raise SchemaNotSupported(f"{field}: constrained decoding cannot use this schema: {reason}", fields=(field,))


def _functions(tools: Sequence[dict[str, Any]]) -> list[tuple[str, dict[str, Any]]]:
    """(name, parameters schema) of each function in OpenAI ``tools``, each schema checked.
    Raises SchemaNotSupported for an unusable tool."""
    found = []
    for i, tool in enumerate(tools):
        function = tool.get("function") if isinstance(tool, dict) else None
        if not isinstance(function, dict) or not isinstance(function.get("name"), str):
            field = f"tools[{i}].function"
            raise SchemaNotSupported(f"{field}: a function tool needs a function with a name", fields=(field,))
        parameters = function.get("parameters", JSON_OBJECT)
        check_schema(parameters, f"tools[{i}].function.parameters")
        found.append((function["name"], parameters))
    return found


def call_schema(
    tools: Sequence[dict[str, Any]], name: Optional[str] = None, arguments_key: str = "arguments"
) -> dict[str, Any]:
    """The schema of one call ``{"name": ..., "arguments": ...}`` of ``tools``: of the function
    ``name``, or any of them (``anyOf``) when None; ``arguments_key`` names the arguments (Llama 3
    writes ``parameters``). Raises SchemaNotSupported for a schema that cannot be compiled, Refusal
    (``tool_choice``) for an unknown name or no tools."""
    functions = _functions(tools)
    if name is not None:
        functions = [(n, p) for n, p in functions if n == name]
        if not functions:
            raise Refusal(f"tool_choice: no function in tools is named {name!r}", fields=("tool_choice",))
    if not functions:
        raise Refusal("tool_choice: a call was required but tools is empty", fields=("tool_choice", "tools"))
    calls = [
        {
            "type": "object",
            "properties": {"name": {"const": n}, arguments_key: p},
            "required": ["name", arguments_key],
            "additionalProperties": False,
        }
        for n, p in functions
    ]
    return calls[0] if len(calls) == 1 else {"anyOf": calls}


def response_schema(response_format: Optional[dict[str, Any]]) -> Optional[dict[str, Any]]:
    """The schema that OpenAI ``response_format`` asks for, or None for free text. Raises
    SchemaNotSupported (``response_format.json_schema``) or Refusal (``response_format``)."""
    kind = (response_format or {}).get("type", "text")
    if kind == "text":
        return None
    if kind == "json_object":
        return JSON_OBJECT
    if kind == "json_schema":
        schema = (response_format.get("json_schema") or {}).get("schema", JSON_OBJECT)
        check_schema(schema, RESPONSE_FIELD)
        return schema
    raise Refusal(
        f"response_format: type {kind!r} is not text, json_object or json_schema", fields=("response_format",)
    )


@dataclass(frozen=True)
class Constraint:
    """What a generation must produce: ``prefix`` + JSON matching ``schema`` + ``suffix``, then an
    end-of-turn token. ``field``: the request field a compile failure is reported against."""

    schema: dict[str, Any]
    prefix: str = ""
    suffix: str = ""
    field: str = RESPONSE_FIELD

    def processor(self, tokenizer: Any, stop_ids: Sequence[int]) -> JsonConstraintProcessor:
        """A fresh logits processor for one ``model.generate`` call; ``stop_ids``: the end-of-turn
        ids allowed (only) after the suffix. Raises SchemaNotSupported."""
        ll_tokenizer = _ll_tokenizer(tokenizer, tuple(stop_ids))
        return JsonConstraintProcessor(compiled(ll_tokenizer, self), stop_ids, ll_tokenizer.vocab_size)


def call_constraint(
    tools: Sequence[dict[str, Any]],
    name: Optional[str] = None,
    prefix: str = "",
    suffix: str = "",
    arguments_key: str = "arguments",
) -> Constraint:
    """A ``Constraint`` for one call of ``tools`` (``call_schema``) between ``prefix`` and ``suffix``."""
    return Constraint(call_schema(tools, name, arguments_key), prefix, suffix, field="tools")


def response_constraint(response_format: Optional[dict[str, Any]]) -> Optional[Constraint]:
    """A ``Constraint`` for ``response_format`` (``response_schema``), or None for free text."""
    schema = response_schema(response_format)
    return None if schema is None else Constraint(schema)


@lru_cache(maxsize=4)
def _ll_tokenizer(tokenizer: Any, stop_ids: tuple[int, ...]) -> Any:
    """llguidance's view of a Hugging Face fast tokenizer with ``stop_ids`` as its eos (~0.5 s)."""
    import llguidance.hf

    return llguidance.hf.from_tokenizer(tokenizer, eos_token=list(stop_ids))


_compiled: OrderedDict[tuple[Any, ...], Any] = OrderedDict()
_lock = threading.Lock()


def compiled(ll_tokenizer: Any, constraint: Constraint) -> Any:
    """An unused llguidance ``LLMatcher`` of ``constraint`` for ``ll_tokenizer`` (an ``LLTokenizer``
    kept alive by its own cache; copy the matcher before use), compiled once and kept in a bounded
    LRU (``CACHE_SIZE``). Raises SchemaNotSupported."""
    import llguidance

    key = (id(ll_tokenizer), json.dumps(constraint.schema, sort_keys=True), constraint.prefix, constraint.suffix)
    with _lock:
        if key in _compiled:
            _compiled.move_to_end(key)
            return _compiled[key]
    began = time.perf_counter()
    matcher = llguidance.LLMatcher(ll_tokenizer, _grammar(constraint.schema, constraint.prefix, constraint.suffix))
    if matcher.is_error():
        reason = matcher.get_error().split("failed to compile JSON schema: ", 1)[-1].splitlines()[0]
        field = constraint.field
        raise SchemaNotSupported(f"{field}: constrained decoding cannot use this schema: {reason}", fields=(field,))
    log.debug("constraint compiled in %.1f ms", 1000 * (time.perf_counter() - began))
    with _lock:
        _compiled[key] = matcher
        while len(_compiled) > CACHE_SIZE:
            _compiled.popitem(last=False)
    return matcher


def _allowed(bitmask: Any, vocab: int) -> Any:
    """The (B, vocab) numpy bool mask of llguidance's (B, ceil(n/32)) int32 bitmask (bit i of word
    j: token 32j + i); ids past it: False."""
    import numpy as np

    bits = np.unpackbits(bitmask.view(np.uint8), axis=1, count=vocab, bitorder="little")  # (B, vocab)
    return bits.astype(bool)


def _masked(scores: Any, allowed: Any) -> Any:
    """``scores`` (B, V) with the tokens not ``allowed`` (numpy bool (B, V)) at -inf. CPU float32
    goes through numpy: one thread, so these tiny ops never wait on torch's thread pool."""
    import numpy as np
    import torch

    if scores.device.type == "cpu" and scores.dtype == torch.float32:
        return torch.from_numpy(np.where(allowed, scores.numpy(), np.float32(-np.inf)))
    return scores.masked_fill(~torch.from_numpy(allowed).to(scores.device), float("-inf"))


class JsonConstraintProcessor:
    """A transformers ``LogitsProcessor`` for one ``generate`` call: each step it feeds the last
    token to one llguidance matcher per row and sets every token the grammar forbids to -inf.
    ``accepted``: every row's grammar reached its end (the JSON closed, the suffix written)."""

    def __init__(self, template: Any, stop_ids: Sequence[int], vocab: int) -> None:
        self.template, self.stop_ids, self.vocab = template, list(stop_ids), vocab
        self.matchers: list[Any] = []
        self.bitmask: Any = None  # numpy (B, ceil(vocab / 32)) int32, llguidance's layout

    def __call__(self, input_ids: Any, scores: Any) -> Any:  # (B, T) ids, (B, V) scores
        self.advance([int(token) for token in input_ids[:, -1]])
        return _masked(scores, self.allowed(scores.shape[1]))

    def advance(self, last: list[int]) -> None:
        """Feed each row its last token (``last``: one id a row); the first call, when ``last`` is
        the prompt's end, only sets up one matcher a row."""
        import numpy as np

        if not self.matchers:  # the first step: nothing generated yet
            self.matchers = [self.template.deep_copy() for _ in last]
            self.bitmask = np.zeros((len(last), (self.vocab + 31) // 32), dtype=np.int32)
            return
        for token, matcher in zip(last, self.matchers):
            if not matcher.is_stopped() and not matcher.is_error():
                matcher.consume_token(token)

    def allowed(self, vocab: int) -> Any:
        """(B, vocab) numpy bool: the tokens each row may take next. A row whose grammar has ended (only
        an end-of-turn token fits now) or failed (a forbidden token was forced) may take a stop id."""
        width = self.bitmask.shape[1] * 4  # bytes per row
        ended = [m.is_stopped() or m.is_error() for m in self.matchers]
        for row, matcher in enumerate(self.matchers):
            if not ended[row]:
                matcher.unsafe_compute_mask_ptr(self.bitmask[row].ctypes.data, width)
        allowed = _allowed(self.bitmask, vocab)
        for row in (r for r, done in enumerate(ended) if done):
            allowed[row] = False
            allowed[row, [i for i in self.stop_ids if i < vocab]] = True
        return allowed

    @property
    def accepted(self) -> bool:
        """True when every row's matcher reached the grammar's end without an error."""
        return bool(self.matchers) and all(m.is_accepting() and not m.is_error() for m in self.matchers)
