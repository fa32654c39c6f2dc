"""The inference process: loads one ``ModelChoice``, then answers generation commands until told to
exit. Runs in a spawned child supervised by the chat engine (``process.supervisor``), so a crash or
an out-of-memory kill costs the chat model, never the app.

Commands in (``None`` = exit): ``(gen_id, {"messages": [...], "settings": {...}, "use_adapter": bool,
"tools": [...], "tool_choice": "auto" | "none"})`` (``tools`` and ``tool_choice`` optional: the answer's
calls, parsed in the model's format, come in the ``done`` event), ``(gen_id, {"prompt": str, "settings":
{...}})`` (a text completed as it is, no chat template), or for a model whose kind serves something else (``ModelKind.load_server``: an embedding model) that
kind's request (``{"input": [...], ...}``).
Events out, payloads plain dicts (``EventKind``). The stop ``Event`` set = end the running
generation at the next token (the engine clears it before each command).
"""

from __future__ import annotations

import logging
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

from trainer_core.serving.errors import ChatInputError

log = logging.getLogger(__name__)


class EventKind:
    """Event kinds on the inference worker -> engine queue."""

    LOADED = "loaded"  # {"seconds": float, "device": str, "context_tokens": int}
    DELTA = "delta"  # {"id": gen_id, "text": str}
    DONE = "done"  # {"id": gen_id, "finish_reason": str, "prompt_tokens": int, "completion_tokens": int,
    #                  and where the answer called tools "tool_calls": [OpenAI tool call, ...]}
    # (an embedding model's: {"id": gen_id, "vectors": float32 array (N, D), "prompt_tokens": int})
    ERROR = "error"  # {"id": gen_id or None, "kind": "load" | "input" | "internal", "message": str,
    #                   and for an input error "code": str, "fields": [str, ...]}


def failure_message(exc: BaseException) -> str:
    """A short message for an unexpected failure (the traceback goes to the log)."""
    text = " ".join(str(exc).split())[:600]
    if "out of memory" in text.lower() or "can't allocate memory" in text.lower():
        return f"The chat model ran out of memory: {text}. Lower max_new_tokens or chat with a smaller model."
    return f"The chat model failed: {type(exc).__name__}: {text}"


def quiet_libraries() -> None:
    """The app's console is for the app's log lines: no load progress bars or library deprecations."""
    import warnings

    import transformers

    transformers.utils.logging.disable_progress_bar()
    warnings.filterwarnings("ignore", message=".*is_gradient_checkpointing.*", category=FutureWarning)


def serve(choice: dict[str, Any], models_dir: str, commands: Any, events: Any, stop: Any) -> None:
    """Process entry point (``choice`` is ``ModelChoice.model_dump()``). Never raises: a failed load
    is one ``error`` event (kind ``load``) and the process ends; a failed generation is an
    ``error`` event for that generation and the process waits for the next command."""
    from trainer_core.process.parent import exit_with_parent

    exit_with_parent()
    try:
        from trainer_core.data.local_kind import choice_kind
        from trainer_core.models.loading import ModelLoadError
        from trainer_core.serving.constraints import request_constraint
        from trainer_core.serving.generate import generate, warm_up
        from trainer_core.serving.loader import load_choice
        from trainer_core.serving.schemas import GenerationSettings, ModelChoice
        from trainer_core.tools.parse import call_format

        quiet_libraries()
        picked = ModelChoice(**choice)
        server = choice_kind(picked).load_server(picked, Path(models_dir))  # e.g. CSM or Orpheus for speech
        if server is None:
            loaded = load_choice(picked, Path(models_dir))
            warm_up(loaded)
    except BaseException as exc:  # noqa: BLE001 - the process boundary: report everything
        log.error("loading %s failed:\n%s", choice.get("id"), traceback.format_exc())
        known = type(exc).__name__ in ("ModelLoadError", "ChatInputError")
        events.put(
            (EventKind.ERROR, {"id": None, "kind": "load", "message": str(exc) if known else failure_message(exc)})
        )
        return
    if server is not None:  # another kind's model (an embedder): its own answers
        events.put((EventKind.LOADED, {"seconds": server.load_seconds, "device": server.device, "context_tokens": 0}))
        answer_commands(
            commands, events, lambda request, on_text: server.answer(request), load_errors=(ModelLoadError,)
        )
        return
    events.put(
        (
            EventKind.LOADED,
            {"seconds": loaded.load_seconds, "device": loaded.device, "context_tokens": loaded.context_tokens},
        )
    )

    def generated(request: dict, on_text: Callable[[str], None]) -> dict[str, Any]:
        finish = generate(
            loaded,
            request.get("messages", []),
            GenerationSettings(**request["settings"]),
            on_text=on_text,
            should_stop=stop.is_set,
            use_adapter=request.get("use_adapter", True),
            tools=request.get("tools"),
            raw_prompt=request.get("prompt"),
            constraint=None if "prompt" in request else request_constraint(request, call_format(loaded.tokenizer)),
        )
        return {
            "finish_reason": finish.reason,
            "prompt_tokens": finish.prompt_tokens,
            "completion_tokens": finish.completion_tokens,
        }

    def answer(request: dict, on_text: Callable[[str], None]) -> dict[str, Any]:
        if "messages" not in request and "prompt" not in request:
            raise ChatInputError(f"{picked.id} is a chat model: it answers chat, not embeddings", fields=("model",))
        return with_calls(request, loaded.tokenizer, on_text, generated)

    answer_commands(commands, events, answer, load_errors=(ModelLoadError,))  # a full fine-tune's base: on first use


def with_calls(
    request: dict[str, Any],
    template: Any,
    on_text: Callable[[str], None],
    generated: Callable[[dict[str, Any], Callable[[str], None]], dict[str, Any]],
) -> dict[str, Any]:
    """``generated(request, on_text)``'s ``done`` payload, and where ``request`` has ``tools`` (and
    ``tool_choice`` is not ``none``) the answer's calls in it as ``tool_calls``, read in the call
    format of ``template``'s chat template (``tools.parse``): text streams on until a call starts; a
    call of a function that was not offered leaves the answer as text."""
    from trainer_core.tools.parse import CallSplitter, call_format

    if not request.get("tools") or request.get("tool_choice", "auto") == "none":
        return generated(request, on_text)
    splitter = CallSplitter(call_format(template), on_text)
    done = generated(request, splitter.feed)
    calls = splitter.finish(known={tool["function"]["name"] for tool in request["tools"]})
    return done | ({"tool_calls": calls} if calls else {})


def answer_commands(
    commands: Any,
    events: Any,
    answer: Callable[[dict, Callable[[str], None]], dict[str, Any]],
    load_errors: tuple[type[BaseException], ...] = (),
) -> None:
    """Answer commands until told to exit (``None``); shared by every inference worker.
    ``answer(request, on_text)`` streams any text through ``on_text`` and returns the ``done``
    event's payload (``EventKind.DONE``). Its ChatInputError is an ``input`` error event (with its
    ``code`` and ``fields``), one of
    ``load_errors`` a ``load`` one, anything else an ``internal`` one (logged with its traceback);
    the process then waits for the next command."""
    while (command := commands.get()) is not None:
        gen_id, request = command
        try:
            done = answer(
                request, lambda text, gen_id=gen_id: events.put((EventKind.DELTA, {"id": gen_id, "text": text}))
            )
        except ChatInputError as exc:
            refusal = {"code": exc.code, "fields": list(exc.fields)}
            events.put((EventKind.ERROR, {"id": gen_id, "kind": "input", "message": str(exc), **refusal}))
            continue
        except load_errors as exc:
            events.put((EventKind.ERROR, {"id": gen_id, "kind": "load", "message": str(exc)}))
            continue
        except Exception as exc:  # noqa: BLE001 - one failed answer must not end the process
            log.error("generation failed:\n%s", traceback.format_exc())
            events.put((EventKind.ERROR, {"id": gen_id, "kind": "internal", "message": failure_message(exc)}))
            continue
        events.put((EventKind.DONE, {"id": gen_id, **done}))
