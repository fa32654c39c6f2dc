"""The inference process for a GGUF export: the file run by llama.cpp (the build ``scripts/setup.sh``
made, ``Settings.llama_cpp_dir``), speaking the same commands and events as ``serving.worker``.

Never imports torch or transformers: the process is up in about a second. The prompt is the chat
template stored in the GGUF (``llamacpp.chat_template``: what llama.cpp's users get; the
export check proved it renders as the run's tokenizer does), shaped first as training shaped its
data (``data.template_fit``). Generation is llama.cpp's sampler chain (``Llama.generate``: top-k,
top-p, temperature, repetition penalty; temperature 0 = greedy), the KV cache kept between turns
(a follow-up only evaluates its new tokens). It ends at an end-of-generation token of the
vocabulary (``llama_vocab_is_eog``: ``stop``), at ``max_new_tokens`` (``length``) or when the
stop flag is set (``cancelled``). The context is the model's training context, at most
``MAX_CONTEXT`` tokens (the KV cache of a 128k-context model would not fit a laptop).
"""

from __future__ import annotations

import codecs
import dataclasses
import logging
import sys
import time
import traceback
from typing import Any, Optional

from trainer_core.serving.errors import ChatInputError
from trainer_core.serving.worker import EventKind, answer_commands, failure_message, with_calls

log = logging.getLogger(__name__)
MAX_CONTEXT = 8192
BASE_REFUSAL = (
    "a GGUF export holds only the tuned weights, not its base model: to compare with the base model, "
    "choose the run it was exported from"
)


def _threads() -> int:
    """llama.cpp threads: the physical cores this process may use (llama-cpp-python's own default
    is half the logical CPUs, whatever the container allows)."""
    import os

    import psutil

    allowed = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    return max(1, min(psutil.cpu_count(logical=False) or allowed, allowed))


def trained_context(path: str) -> int:
    """The ``<architecture>.context_length`` in the GGUF's header (0 when absent), read with the
    vocabulary only (no weights, no context). Raises ChatInputError when llama.cpp cannot read it."""
    import ctypes

    import llama_cpp

    params = llama_cpp.llama_model_default_params()
    params.vocab_only = True
    model = llama_cpp.llama_model_load_from_file(path.encode(), params)
    if not model:
        raise ChatInputError(f"llama.cpp could not read {path} (not a GGUF file it knows, or damaged)")
    try:
        arch, value = ctypes.create_string_buffer(128), ctypes.create_string_buffer(64)
        llama_cpp.llama_model_meta_val_str(model, b"general.architecture", arch, len(arch))
        if llama_cpp.llama_model_meta_val_str(model, arch.value + b".context_length", value, len(value)) < 0:
            return 0
        return int(value.value or 0)
    finally:
        llama_cpp.llama_model_free(model)


def load(path: str, tools_dir: str) -> tuple[Any, int, float]:
    """``(llm, n_ctx, seconds)`` for the GGUF at ``path``. Raises ChatInputError when llama.cpp
    cannot read the file (its message), ImportError when the build is unusable."""
    if tools_dir not in sys.path:
        sys.path.append(tools_dir)  # after site-packages: nothing in the build shadows the app's packages
    import llama_cpp
    from llama_cpp import _logger

    _logger.set_verbose(False)  # llama.cpp's own log lines: errors only (failures are reported here)
    began = time.monotonic()
    n_ctx = min(trained_context(path) or 2048, MAX_CONTEXT)
    threads = _threads()
    try:
        llm = llama_cpp.Llama(
            model_path=path, n_ctx=n_ctx, n_threads=threads, n_threads_batch=threads, n_gpu_layers=0, verbose=False
        )
    except ValueError as exc:  # llama-cpp-python: "Failed to load model from file"
        raise ChatInputError(f"llama.cpp could not load {path}: {exc}") from None
    return llm, n_ctx, time.monotonic() - began


def prompt_ids(llm: Any, template: Any, messages: list[dict[str, str]], tools: Optional[list] = None) -> list[int]:
    """Token ids of ``messages`` (canonical form for tools) plus the generation prompt, rendered by the
    GGUF's chat template with ``tools`` as ``serving.generate.render_prompt`` renders them. Raises
    ChatInputError when the file has no template, a call is not valid or it cannot render the
    conversation."""
    from jinja2 import TemplateError

    from trainer_core.data.template_fit import fit_conversation, template_fit
    from trainer_core.tools.definitions import ToolsError
    from trainer_core.tools.render import template_conversation

    if not template.chat_template:
        raise ChatInputError("the GGUF has no chat template (tokenizer.chat_template): export the run again")
    try:
        messages, extra = template_conversation(template, messages, tools or [])
    except ToolsError as exc:
        raise ChatInputError(f"messages: {exc}", fields=("messages",)) from None
    try:
        messages = fit_conversation(messages, template_fit(template))
        text = template.apply_chat_template(messages, add_generation_prompt=True, **extra)
    except (TemplateError, ValueError, TypeError) as exc:
        raise ChatInputError(
            f"messages: the chat template of this model cannot render the conversation: {exc}", fields=("messages",)
        ) from None
    return template.ids(text)


def generate(
    llm: Any,
    n_ctx: int,
    ids: list[int],
    settings: dict,
    on_text,
    should_stop,
    special: bool = False,
    constraint: Optional[dict] = None,
) -> tuple[str, int]:
    """Stream the answer to the prompt ``ids`` (see the module docstring) through ``on_text``;
    returns ``(finish_reason, completion_tokens)``. ``special``: control tokens are written (a
    family's call markers, read by ``tools.parse``), else left out. ``constraint``: a
    ``tools.constrain.Constraint`` as a dict (``dataclasses.asdict``), enforced by
    ``tools.constrain_gguf`` (finish ``length`` until its JSON has closed). Raises ChatInputError
    when the prompt and ``max_new_tokens`` do not fit the context; SchemaNotSupported when the
    constraint's schema does not compile."""
    import llama_cpp

    from trainer_core.tools.constrain import Constraint
    from trainer_core.tools.constrain_gguf import LlamaCppConstraint

    limit = int(settings["max_new_tokens"])
    if len(ids) + limit > n_ctx:
        raise ChatInputError(
            f"the conversation is {len(ids)} tokens and max_new_tokens {limit}: together over this GGUF's "
            f"context of {n_ctx} tokens; clear the chat or lower max_new_tokens",
            fields=("max_new_tokens",),
        )
    vocab = llama_cpp.llama_model_get_vocab(llm.model)
    processor = LlamaCppConstraint(llm, Constraint(**constraint)) if constraint else None
    decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
    llm.set_seed(int(settings["seed"]))
    count, reason = 0, "length"
    tokens = llm.generate(
        ids,
        top_k=int(settings["top_k"]),
        top_p=float(settings["top_p"]),
        min_p=0.0,
        temp=float(settings["temperature"]),
        repeat_penalty=float(settings["repetition_penalty"]),
        reset=True,
        logits_processor=llama_cpp.LogitsProcessorList([processor]) if processor else None,
    )
    for token in tokens:
        if should_stop():
            reason = "cancelled"
            break
        if llama_cpp.llama_vocab_is_eog(vocab, token):
            reason = "stop" if processor is None or processor.accepted else "length"
            break
        count += 1
        text = decoder.decode(llm.detokenize([token], special=special))
        if text:
            on_text(text)
        if count >= limit:
            break
    tail = decoder.decode(b"", final=True)
    if tail:
        on_text(tail)
    return reason, count


def serve_gguf(choice: dict[str, Any], tools_dir: str, commands: Any, events: Any, stop: Any) -> None:
    """Process entry point (``choice`` is a GGUF ``ModelChoice.model_dump()``; ``tools_dir`` the
    llama.cpp build). Never raises; events as ``serving.worker.serve``'s."""
    from trainer_core.process.parent import exit_with_parent

    exit_with_parent()
    try:
        from trainer_core.llamacpp.chat_template import TemplateRenderer
        from trainer_core.serving.constraints import request_constraint
        from trainer_core.tools.parse import call_format

        llm, n_ctx, seconds = load(choice["path"], tools_dir)
        template = TemplateRenderer(llm)
    except BaseException as exc:  # noqa: BLE001 - the process boundary: report everything
        known = isinstance(exc, ChatInputError)
        log.error("loading %s failed: %s", choice.get("id"), exc if known else traceback.format_exc())
        events.put(
            (EventKind.ERROR, {"id": None, "kind": "load", "message": str(exc) if known else failure_message(exc)})
        )
        return
    events.put((EventKind.LOADED, {"seconds": seconds, "device": "cpu (llama.cpp)", "context_tokens": n_ctx}))

    def generated(request: dict, on_text: Any) -> dict[str, Any]:
        if "prompt" in request:  # a text completed as it is: no chat template
            ids = [int(i) for i in llm.tokenize(request["prompt"].encode("utf-8"), add_bos=True, special=False)]
        else:
            ids = prompt_ids(llm, template, request["messages"], request.get("tools"))
        special = bool(request.get("tools"))  # keep the calls' markers
        forced = None if "prompt" in request else request_constraint(request, call_format(template))
        constraint = dataclasses.asdict(forced) if forced is not None else None
        reason, count = generate(llm, n_ctx, ids, request["settings"], on_text, stop.is_set, special, constraint)
        return {"finish_reason": reason, "prompt_tokens": len(ids), "completion_tokens": count}

    def answer(request: dict, on_text: Any) -> dict[str, Any]:
        if not request.get("use_adapter", True):
            raise ChatInputError(BASE_REFUSAL)
        if "messages" not in request and "prompt" not in request:
            raise ChatInputError(f"{choice['id']} is a chat model: it answers chat, not embeddings", fields=("model",))
        return with_calls(request, template, on_text, generated)

    answer_commands(commands, events, answer)
    llm.close()
