"""The Codex-style round trip of ``bench.tool_calls``: a ``POST /v1/responses`` request (the
``openai`` client's ``responses.create``) with a held-out question and its function tool, the model's
``function_call`` (asked with ``tool_choice`` auto; forced with ``required`` only where the model
answered in words, and then said so), the row's own tool result sent back as a
``function_call_output`` item after the earlier ones, and the final answer (asked with auto; again
with ``none`` only where the model called a function again, and then said so); against a run and
against its GGUF export (made through ``POST /api/train/export``); ``wait_until`` polls the app."""

from __future__ import annotations

import time
from typing import Any

from bench.latency import App
from bench.tool_points import openai_messages
from trainer_core.evaluation.rows import EvalRow

POLL_S = 1.0


def wait_until(app: App, path: str, done: Any, timeout_s: float) -> dict[str, Any]:
    """Poll ``GET path`` until ``done(body)``; the last body. TimeoutError after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        body = app.client.get(path).json()
        if done(body):
            return body
        time.sleep(POLL_S)
    raise TimeoutError(f"{path}: not done within {timeout_s:.0f} s")


def exported(app: App, job_id: str, gguf_type: str) -> str:
    """The /v1 model id of the run's GGUF export (exported now through ``POST /api/train/export``)."""
    task = app.client.post("/api/train/export", json={"model": job_id, "format": f"gguf-{gguf_type}"})
    task.raise_for_status()
    task_id = task.json()["task_id"]
    done = wait_until(app, f"/api/train/tasks/{task_id}", lambda t: t["phase"] not in ("queued", "running"), 3600)
    if done["phase"] != "completed":
        raise RuntimeError(f"export ended {done['phase']}: {done.get('error') or done.get('message')}")
    return f"{task_id}/{gguf_type}"


def round_trip(client: Any, model: str, point: EvalRow, result: str, max_tokens: int) -> dict[str, Any]:
    """The Codex-style round trip through ``responses.create`` (see the module docstring): each
    request with ``tool_choice`` auto first; the call forced (``required``) only where auto answered
    in words, and the final answer asked again with ``none`` only where auto called a function
    again (``forced`` / ``quieted``, with what auto said then)."""
    from trainer_core.data.tool_rows import loaded

    tools = [{"type": "function", **tool["function"]} for tool in loaded(point.tools)]
    question = openai_messages(point.prompt)

    def ask(items: list[Any], wanted: str, fallback: str) -> tuple[Any, list[dict[str, Any]]]:
        said = []
        for choice in ("auto", fallback):
            reply = client.responses.create(
                model=model, input=items, tools=tools, tool_choice=choice, temperature=0, max_output_tokens=max_tokens
            )
            said.append([item.model_dump(exclude_none=True) for item in reply.output])
            if any(item.type == wanted for item in reply.output):
                break
        return reply, said

    first, first_said = ask(question, "function_call", "required")
    call = next(item for item in first.output if item.type == "function_call")
    back = [*question, call.model_dump(exclude_none=True)]
    back.append({"type": "function_call_output", "call_id": call.call_id, "output": result})
    final, final_said = ask(back, "message", "none")
    return {
        "model": model,
        "forced": len(first_said) > 1,
        "quieted": len(final_said) > 1,
        "auto_said": {"first": first_said[0], "final": final_said[0]},
        "first": first_said[-1],
        "sent_back": back[-1],
        "final": final_said[-1],
        "final_text": final.output_text,
    }


def round_trip_point(points: list[EvalRow]) -> tuple[EvalRow, str]:
    """A held-out point whose expected answer is a call, and the tool result its row gives that call."""
    from trainer_core.evaluation.tool_calls import expected_calls
    from trainer_core.tools.render import unwrapped_result

    for k, point in enumerate(points[:-1]):
        after = points[k + 1]
        if expected_calls(point.reference) and after.index == point.index and after.prompt[-1]["role"] == "tool":
            return point, unwrapped_result(after.prompt[-1]["content"])
    raise LookupError("no held-out point calls a function and has its result")
