"""Tool calls, base vs tuned, through the studio's server and the ``openai`` client (issue 50's targets).

Runs the real ``python app.py`` (``bench.latency.App``) with a data dir of its own and drives it over
HTTP as a user would: ``POST /api/train/start`` trains the default model (SmolLM2-135M-Instruct, the
bundled offline copy) with every setting at its default on ``glaive_toolcall_en_demo.json``, holding
``VAL_SIZE`` of its rows out with the studio's own split (``val_size``: seeded by ``random_seed``).
Then, on the held-out rows (one point per assistant turn, the turns before it as the prompt, as the
evaluation scores them: ``evaluation.rows``), each point is asked through ``/v1/chat/completions``
with the row's ``tools`` by the ``openai`` client, greedily, of the base model and of the tuned run:

- ``tool_choice`` auto: the scores of ``tools.scoring.score_calls`` (valid-call rate: of the answers
  that attempted a call, the share whose calls parse and match their function's schema; function-name
  accuracy: of the points that should call, the share whose first call names the expected function);
- ``tool_choice`` required, at the points that should call: the share of answers whose call parses
  and matches its schema (target 100 %: constrained decoding) and its name accuracy.

Last, the Codex-style round trip through ``/v1/responses`` (``responses.create``) against the tuned
run and against its GGUF export (``POST /api/train/export``, ``--gguf-type``): a held-out question
with its function tool, the model's ``function_call`` (asked with ``tool_choice`` auto; forced with
``required`` only where the model answered in words, and then said so), the row's own tool result
sent back as ``function_call_output``, and the final text answer (asked with auto; with ``none``
where auto called again, and then said so); every item is printed.

    python -m bench.tool_calls [--quick | --steps N] [--points N] [--data-dir DIR] [--max-tokens N]
                               [--call-max-tokens N] [--gguf-type q8_0]

``--steps N`` trains N steps instead of the default epochs; ``--quick`` is ``--steps 4``, 6 points
and 48 new tokens (a smoke run: not the figure). ``--max-tokens`` (128) bounds an answer with
``tool_choice`` auto; ``--call-max-tokens`` (256) a forced call (a call cut there is not valid: the
report lists each invalid answer with its finish reason) and the round trip's answers. ``--data-dir`` keeps the studio's data (the run, the
export) there; a run of the same request found in it is reused. Prints one JSON line, a summary,
and writes docs/bench-results/tool_calls.json (``--out``).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import tempfile
import time
from contextlib import closing
from pathlib import Path
from typing import Any, Optional

from bench.latency import App
from bench.responses_round_trip import exported, round_trip, round_trip_point, wait_until
from bench.tool_points import held_out_points, openai_messages
from trainer_core.evaluation.rows import EvalRow
from trainer_core.tools.scoring import CallScores, Said

REPO = Path(__file__).resolve().parents[1]
DATASET = REPO.parent / "shared" / "datasets" / "glaive_toolcall_en_demo.json"
RESULTS = REPO / "docs" / "bench-results" / "tool_calls.json"
VAL_SIZE = 0.1
PORT = 7873


def run_request(steps: int) -> dict[str, Any]:
    """The training request: the dataset and the held-out share; every other setting its default
    (``steps`` > 0: that many steps instead of the default epochs)."""
    return {"local_datasets": [str(DATASET)], "val_size": VAL_SIZE, **({"max_steps": steps} if steps else {})}


def trained(app: App, request: dict[str, Any]) -> dict[str, Any]:
    """The finished run of ``request`` in the app's history, trained now unless one is there:
    ``{"job_id", "reused", "steps", "final_loss", "training_seconds", "wall_seconds"}``.
    RuntimeError when training fails."""
    done = [
        run
        for run in app.client.get("/api/train/runs").json()
        if run["phase"] == "completed" and all(run["request"].get(key) == value for key, value in request.items())
    ]
    reused = bool(done)
    if not reused:
        started = app.client.post("/api/train/start", json=request)
        started.raise_for_status()
        job_id = started.json()["job_id"]
        wait_until(app, "/api/train/status", lambda s: s["job_id"] == job_id and not s["is_training_running"], 7200)
        done = [app.client.get(f"/api/train/runs/{job_id}").json()]
    run = done[0]
    if run["phase"] != "completed":
        raise RuntimeError(f"training ended {run['phase']}: {run.get('error')}")
    return {
        "job_id": run["job_id"],
        "reused": reused,
        "steps": run["total_steps"],
        "final_loss": run["final_loss"],
        "training_seconds": run["training_seconds"],
        "wall_seconds": run["wall_seconds"],
    }


def asked(
    client: Any, model: str, point: EvalRow, tool_choice: str, max_tokens: int, fmt: str
) -> tuple[Said, str, str]:
    """What ``model`` says at ``point`` through ``/v1/chat/completions`` (greedy): its ``tool_calls``
    and whether it began a call (a call that did not parse comes back as text), the finish reason
    and the answer's text. Raises
    ``openai.BadRequestError`` where the server refuses the request (a schema it cannot compile)."""
    from trainer_core.data.tool_rows import loaded
    from trainer_core.tools.parse import call_start

    reply = client.chat.completions.create(
        model=model,
        messages=openai_messages(point.prompt),
        tools=loaded(point.tools),
        tool_choice=tool_choice,
        temperature=0,
        max_tokens=max_tokens,
    )
    message = reply.choices[0].message
    calls = [{"name": c.function.name, "arguments": c.function.arguments} for c in message.tool_calls or []]
    said = Said(calls, bool(calls) or call_start(message.content or "", fmt) is not None)
    return said, reply.choices[0].finish_reason, message.content or ""


def scored(client: Any, model: str, points: list[EvalRow], tool_choice: str, max_tokens: int, fmt: str) -> dict:
    """``score_calls`` of ``model``'s answers at ``points``, the seconds they took, the requests the
    server refused (400: scored as an answer without a call; their messages listed) and the answers
    that attempted a call but are not valid (their finish reason and text: ``length`` is a call cut
    at ``max_tokens``)."""
    from dataclasses import asdict

    import openai

    from trainer_core.data.tool_rows import loaded
    from trainer_core.evaluation.tool_calls import expected_calls
    from trainer_core.tools.scoring import score_calls, valid

    began, said, refused, invalid = time.perf_counter(), [], [], []
    for point in points:
        try:
            answer, finish, text = asked(client, model, point, tool_choice, max_tokens, fmt)
        except openai.BadRequestError as exc:
            said.append(Said([], False))
            refused.append(str(exc)[:300])
            continue
        said.append(answer)
        if answer.attempted and not valid(answer.calls, loaded(point.tools)):
            invalid.append({"finish_reason": finish, "text": text[:300], "calls": answer.calls})
    scores: CallScores = score_calls(
        [expected_calls(p.reference) for p in points], said, [loaded(p.tools) for p in points]
    )
    seconds = round(time.perf_counter() - began, 1)
    return {**asdict(scores), "refused": refused, "invalid": invalid, "seconds": seconds}


def measure(
    data_dir: Path, steps: int, points_limit: int, max_tokens: tuple[int, int], gguf_type: str, out: Path
) -> dict[str, Any]:
    """The whole bench (see the module docstring); the report so far is written to ``out`` after
    each stage, so a late failure keeps the figures measured before it. ``max_tokens``: (of an answer
    with tool_choice auto, of a forced call and of the round trip's answers)."""
    import openai

    from trainer_core.evaluation.tool_calls import answer_format, expected_calls
    from trainer_core.models.loading import load_tokenizer, materialize_default_model
    from trainer_core.settings import get_settings

    request = run_request(steps)
    fmt = answer_format(load_tokenizer(materialize_default_model(get_settings().models_dir)))
    points = held_out_points(request)[: points_limit or None]
    calling = [p for p in points if expected_calls(p.reference)]
    report: dict[str, Any] = {
        "bench": "tool_calls",
        "date": time.strftime("%Y-%m-%d"),
        "machine": f"{platform.machine()}, {os.cpu_count()} cores",
        "request": request,
        "call_format": fmt,
        "max_tokens": max_tokens[0],
        "call_max_tokens": max_tokens[1],
        "points": {"rows": len({p.index for p in points}), "points": len(points), "should_call": len(calling)},
    }

    def save() -> None:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(report, indent=1) + "\n")

    app = App(PORT, data_dir, DATASET)
    with closing(app):
        app.wait_for_page()
        report["run"] = trained(app, request)
        save()
        job_id = report["run"]["job_id"]
        client = openai.OpenAI(base_url=f"{app.url}/v1", api_key="no-token-set", max_retries=0, timeout=900)
        for side, model in (("base", "base"), ("tuned", job_id)):
            report[side] = {
                "auto": scored(client, model, points, "auto", max_tokens[0], fmt),
                "required": scored(client, model, calling, "required", max_tokens[1], fmt),
            }
            save()
        point, result = round_trip_point(points)
        report["round_trips"] = [round_trip(client, job_id, point, result, max_tokens[1])]
        save()
        began = time.perf_counter()
        gguf = exported(app, job_id, gguf_type)
        report["export_seconds"] = round(time.perf_counter() - began, 1)
        report["round_trips"].append(round_trip(client, gguf, point, result, max_tokens[1]))
        save()
    return report


def _pct(share: Optional[float]) -> str:
    return "n/a" if share is None else f"{100 * share:.0f} %"


def summary(report: dict[str, Any]) -> list[str]:
    """The human lines printed after the JSON."""
    run, pts = report["run"], report["points"]
    lines = [
        f"run {run['job_id']}{' (reused)' if run['reused'] else ''}: {run['steps']} steps, "
        f"{run['training_seconds']} s training, final loss {run['final_loss']}; "
        f"held out: {pts['rows']} rows, {pts['points']} points, {pts['should_call']} should call"
    ]
    for side in ("base", "tuned"):
        auto, required = report[side]["auto"], report[side]["required"]
        lines.append(
            f"{side:5}: auto: valid-call rate {_pct(auto['valid_call_rate'])} of {auto['attempted']} attempts, "
            f"name accuracy {_pct(auto['name_accuracy'])}, arguments exact {_pct(auto['arguments_exact'])}, "
            f"called when it should {_pct(auto['called_when_should'])}, quiet when it should not "
            f"{_pct(auto['quiet_when_should_not'])} | required: valid {_pct(required['valid_call_rate'])} of "
            f"{required['attempted']}, name accuracy {_pct(required['name_accuracy'])}, "
            f"{len(required['refused'])} refused ({auto['seconds'] + required['seconds']:.0f} s)"
        )
    for trip in report["round_trips"]:
        forced = " (call forced: with auto it answered in words)" if trip["forced"] else ""
        quieted = " (final asked with tool_choice none: with auto it called again)" if trip["quieted"] else ""
        lines.append(f"round trip with {trip['model']}{forced}{quieted}:")
        lines += [f"  output: {json.dumps(item)}" for item in trip["first"]]
        lines.append(f"  sent back: {json.dumps(trip['sent_back'])}")
        lines += [f"  final: {json.dumps(item)}" for item in trip["final"]]
    return lines


def main(argv: Optional[list[str]] = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="4 steps, 6 points, 48 new tokens: a smoke run")
    parser.add_argument("--steps", type=int, default=0, help="train this many steps (default: the default epochs)")
    parser.add_argument("--data-dir", type=Path, help="the studio's data dir (kept; a finished run there is reused)")
    parser.add_argument("--points", type=int, default=0, help="score only the first N held-out points (default all)")
    parser.add_argument("--max-tokens", type=int, help="new tokens per answer (default 128; quick 48)")
    parser.add_argument(
        "--call-max-tokens", type=int, default=256, help="new tokens of a forced call and of the round trip's answers"
    )
    parser.add_argument("--gguf-type", default="q8_0", help="the GGUF type of the export")
    parser.add_argument("--out", type=Path, default=RESULTS, help="where the JSON report is written")
    args = parser.parse_args(argv)
    steps, points = (args.steps or 4, args.points or 6) if args.quick else (args.steps, args.points)
    max_tokens = (args.max_tokens or (48 if args.quick else 128), args.call_max_tokens)
    if args.data_dir is not None:
        report = measure(args.data_dir, steps, points, max_tokens, args.gguf_type, args.out)
    else:
        with tempfile.TemporaryDirectory() as tmp:
            report = measure(Path(tmp), steps, points, max_tokens, args.gguf_type, args.out)
    print(json.dumps(report))
    print("\n".join(summary(report)))
    return report


if __name__ == "__main__":
    main()
