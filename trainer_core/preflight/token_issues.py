"""The check's findings about how the rows become tokens: no trained token left (training or
evaluation rows), rows shaped to fit a chat template, a model written with the default template,
and the rows' tools (how many, and how the template renders them)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Optional

from trainer_core.preflight import rules
from trainer_core.preflight.gather import Gathered
from trainer_core.preflight.report import Issue
from trainer_core.schemas import TrainingStartRequest

MAX_NAMES = 8  # function names the check's tools line shows


def no_tokens(found: Gathered, request: TrainingStartRequest) -> Optional[Issue]:
    """The zero-trained-tokens error for the training rows, or for the evaluation rows (training
    stops there too: ``tokenize_dataset`` refuses a split without a trained token)."""
    if found.train_counts is not None:
        issue = rules.no_trained_tokens(found.train_counts, found.where, request)
        if issue:
            return issue
    if found.eval_counts is not None and len(found.eval_counts.trained) and not found.eval_counts.kept.any():
        return Issue(
            level="error",
            code="no_eval_tokens",
            fields=["max_seq_length", "local_eval_datasets", "val_size"],
            message=f"no evaluation row keeps an answer token within max_seq_length={request.max_seq_length}, "
            "so evaluation would fail: raise max_seq_length or give other evaluation rows",
        )
    return None


def cached_tokens_pass(request: TrainingStartRequest, tokenizer: Any, kind: Any) -> bool:
    """True when the token cache alone shows Start's token checks pass, so no row need be read:
    an SFT run on local data whose training split (and evaluation split, where it has one) are
    cached (``token_cache.tokenized.cached``: the key holds the files' content hashes, so they read
    and render as when tokenized) with a trained token in each, for a model ``kind`` whose media add
    no tokens (``ModelKind.media_tokens`` not its own). False: read and count the rows (``gather``)."""
    from trainer_core.data.prepare import has_eval_data
    from trainer_core.data.token_cache.tokenized import cached
    from trainer_core.model_kind import ModelKind
    from trainer_core.preflight.tokens import row_counts

    if tokenizer is None or request.hf_dataset or type(kind).media_tokens is not ModelKind.media_tokens:
        return False
    for split in ("train", "eval") if has_eval_data(request) else ("train",):
        found = cached(request, tokenizer, split)
        if found is None or not row_counts(found[0], request.max_seq_length).kept.any():
            return False
    return True


def template_shaping(found: Gathered, tokenizer: Any, request: TrainingStartRequest) -> Optional[Issue]:
    """Warning when the chat template refuses some rows as written and they are shaped to fit
    (``data.template_fit``: Gemma's system text, Mistral's repeated turns)."""
    from trainer_core.data.template_fit import fit_note, shaped_count, template_fit
    from trainer_core.data.tool_rows import NATIVE, tool_format

    if tokenizer is None or "messages" not in found.train.column_names or not tokenizer.chat_template:
        return None
    fit = template_fit(tokenizer)
    if tool_format(tokenizer) == NATIVE:  # results go to the template as tool messages with their call ids
        fit = replace(fit, tool=False)
    note = fit_note(request.model_name, fit, shaped_count(found.train["messages"], fit)) if fit.shapes else None
    return Issue(level="warning", code="template_shaped", message=note, fields=["model_name"]) if note else None


def default_template_note(found: Gathered, tokenizer: Any, request: TrainingStartRequest) -> Optional[Issue]:
    """Warning that the model has no chat template of its own, so conversations are written with
    the default (``models.templates``), shown with an example; the field chooses another."""
    name = getattr(tokenizer, "studio_default_template", None)
    if not name or "messages" not in found.train.column_names:
        return None
    from trainer_core.models.templates import template_example

    return Issue(
        level="warning",
        code="default_chat_template",
        fields=["default_chat_template"],
        message=f"{request.model_name} has no chat template of its own: conversations are written with the "
        f"{name} template, e.g. {template_example(tokenizer)!r}; chat and export use it too "
        "(choose chatml, zephyr or alpaca in default_chat_template)",
    )


def may_use_tools(table: Any) -> bool:
    """False when no row of ``table`` (a ``datasets`` Arrow table with ``messages`` and the tools
    column) defines functions, calls one (``<tool_call>`` in an answer) or has a tool result: read
    in Arrow, no row turned into Python (seconds at 100,000 rows). True may still count none (also
    for columns of another shape than text: the rows are then counted one by one)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    from trainer_core.data.tool_rows import TOOLS

    def any_true(values: Any) -> bool:
        return bool(pc.any(values).as_py())

    tools, turns = table.column(TOOLS), pc.list_flatten(table.column("messages"))
    fields = {field.name: field.type for field in turns.type} if pa.types.is_struct(turns.type) else {}
    texts = (
        pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_null(t)
        for t in (tools.type, *fields.values())
    )
    if not all(texts) or "role" not in fields:
        return True
    if not pa.types.is_null(tools.type) and any_true(pc.greater(pc.utf8_length(tools), 0)):
        return True
    if "content" in fields and not pa.types.is_null(fields["content"]):
        if any_true(pc.match_substring(pc.struct_field(turns, "content"), "<tool_call>")):
            return True
    return not pa.types.is_null(fields["role"]) and any_true(pc.equal(pc.struct_field(turns, "role"), "tool"))


def tools_line(found: Gathered, tokenizer: Any, request: TrainingStartRequest) -> Optional[str]:
    """The check's line on tool use (None when no training row defines functions or calls one): rows
    with tools, the functions defined, calls per row, results (never trained), and whether the
    model's chat template renders the tools natively or the fallback block is used."""
    from trainer_core.data.tool_rows import FALLBACK, TOOLS, tool_counts, tool_format

    if "messages" not in found.train.column_names or TOOLS not in found.train.column_names:
        return None
    if not may_use_tools(found.train.data):
        return None
    counts = tool_counts(found.train["messages"], found.train[TOOLS])
    if not counts.with_tools and not counts.calls:
        return None
    shown = ", ".join(counts.functions[:MAX_NAMES]) + (", …" if len(counts.functions) > MAX_NAMES else "")
    defined = f" ({len(counts.functions)} functions: {shown})" if counts.functions else ""
    line = (
        f"Tools: {counts.with_tools} of {counts.rows} rows define functions{defined}; {counts.with_calls} rows call "
        f"them, {counts.calls} calls in all ({counts.calls / counts.rows:.2f} per row, at most {counts.most_calls}"
        f" in one), answered by {counts.results} tool results, which are never trained"
    )
    if tokenizer is None or not getattr(tokenizer, "chat_template", None):
        return line
    if tool_format(tokenizer) == FALLBACK:
        return (
            f"{line}. The chat template of {request.model_name} does not render tools: the functions go in the "
            "system message as JSON in <tools> (the fallback block) and calls are trained as <tool_call> blocks"
        )
    return f"{line}. The chat template of {request.model_name} renders the tools and calls natively"
