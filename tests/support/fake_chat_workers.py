"""Light stand-ins for ``trainer_core.serving.worker.serve`` (same signature and event protocol), so
the chat engine's queueing, stopping and recovery can be tested in seconds. Module-level: spawn
must import them.

``echo_worker`` answers with the words of the last message (or of a raw ``prompt``; with tools, its
calls are read by the real ``serving.worker.with_calls`` in the fallback's format), one delta per word every ``DELAY_S``
seconds, each prefixed once with ``[choice id]``; special messages: ``die`` (SIGKILL itself, as
the OOM killer would), ``too long`` (an input error), ``boom`` (an internal error). An embeddings
command (``{"input": [...]}``) is answered with unit vectors of [characters, words] per text; ``dimensions``
above 2 is the model's input error."""

import os
import signal
import time

from trainer_core.serving.worker import with_calls

DELAY_S = 0.02


def echo_worker(choice, models_dir, commands, events, stop):
    events.put(("loaded", {"seconds": 0.01, "device": "cpu", "context_tokens": 64}))
    while (command := commands.get()) is not None:
        gen_id, request = command
        if "input" in request:  # an embeddings command: (N, 2) vectors [characters, words], unit length
            _embed(gen_id, request, events)
            continue
        text = request["messages"][-1]["content"] if "messages" in request else request["prompt"]
        if text == "die":
            os.kill(os.getpid(), signal.SIGKILL)
        if text in ("too long", "boom"):
            kind = "input" if text == "too long" else "internal"
            events.put(("error", {"id": gen_id, "kind": kind, "message": f"fake {kind} error"}))
            continue

        def on_text(piece, gen_id=gen_id):
            events.put(("delta", {"id": gen_id, "text": piece}))

        done = with_calls(
            request, "", on_text, lambda request, on_text, text=text: _echo(choice, text, request, on_text, stop)
        )
        events.put(("done", {"id": gen_id, **done}))


def _echo(choice, text, request, on_text, stop):
    """The words of ``text`` after ``[choice id]``, one piece each; the ``done`` payload."""
    words = [f"[{choice['id']}]", *text.split()]
    reason, sent = "stop", 0
    for word in words:
        if stop.is_set():
            reason = "cancelled"
            break
        if sent == request["settings"]["max_new_tokens"]:
            reason = "length"
            break
        on_text(word + " ")
        sent += 1
        time.sleep(DELAY_S)
    return {"finish_reason": reason, "prompt_tokens": len(text.split()), "completion_tokens": sent}


def failing_worker(choice, models_dir, commands, events, stop):
    """Cannot load its model."""
    events.put(("error", {"id": None, "kind": "load", "message": "could not load model from /nowhere: broken"}))


def dying_loader(choice, models_dir, commands, events, stop):
    """Killed while loading."""
    time.sleep(0.2)
    os.kill(os.getpid(), signal.SIGKILL)


def _embed(gen_id, request, events):
    import numpy as np

    if (request.get("dimensions") or 0) > 2:
        refusal = {"code": "dimensions_too_large", "fields": ["dimensions"]}
        events.put(("error", {"id": gen_id, "kind": "input", "message": "dimensions: at most 2", **refusal}))
        return
    raw = np.array([[len(t), len(t.split())] for t in request["input"]], dtype=np.float32)
    vectors = raw / np.linalg.norm(raw, axis=1, keepdims=True)
    words = sum(len(t.split()) for t in request["input"])
    events.put(("done", {"id": gen_id, "vectors": vectors, "prompt_tokens": words}))
