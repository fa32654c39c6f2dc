"""Fuzz every door that takes a path or a run id: 200 random file values, paths and field values
through the API's start, the UI's start, preview, resume and delete (raw Gradio queue calls). Nothing
outside the allowed folders may be read, copied, written or deleted (a canary file and directory
listings before and after), no answer may be a 500 or a traceback, and no studio folder may go."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

from tests.e2e.conftest import CANARY, alpaca, api, assert_no_canary, form_args, idle, logged_in, snapshot
from tests.support.raw_gradio import PREVIEW_OUTPUTS, RawGradio, error_text, file_value

CASES = 200
SEED = 8


def path_pool(settings, outside: Path, datasets_dir: Path) -> list[str]:
    """Paths an attacker would try, plus a few legitimate ones."""
    data = Path(settings.data_dir)
    link = data / "uploads" / "to-canary.jsonl"
    if not link.is_symlink():
        link.parent.mkdir(parents=True, exist_ok=True)
        link.symlink_to(outside / "canary.jsonl")
    return [
        str(outside / "canary.jsonl"),
        str(outside / "canary.json"),
        str(outside),
        str(outside / "model"),
        "/etc/passwd",
        "/etc",
        "/",
        "",
        " ",
        "~",
        "~/.bashrc",
        "../../../../etc/passwd",
        str(data),
        str(data / ".."),
        str(link),
        str(data / "uploads"),
        str(data / "runs"),
        str(data / "studio.db"),
        "a\x00b.json",
        "n" * 300,
        "/" + "a" * 5000,
        "ü/../../x.json",
        "file:///etc/passwd",
        "http://127.0.0.1:1/x.json",
        "\\\\server\\share",
        str(datasets_dir),
        str(datasets_dir / ".." / "STYLE.md"),
        alpaca(datasets_dir),
        str(data / "runs" / "new-run"),
        f"{data}/../{outside.name}/canary.jsonl",
        "some/hub-model",
        "a/b/c/d",
        str(data / "uploads" / "..." / "x"),
    ]


def junk(rng: random.Random) -> Any:
    return rng.choice([float("nan"), float("inf"), -1, 0, 10**12, "", "x" * 3000, None, [], {}, True, "1e999"])


def api_body(rng: random.Random, paths: list[str]) -> str:
    body: dict[str, Any] = {"max_steps": 2}
    for field in rng.sample(
        [
            "local_datasets",
            "local_eval_datasets",
            "output_dir",
            "resume_from_checkpoint",
            "model_name",
            "hf_dataset",
            "learning_rate",
            "batch_size",
        ],
        rng.randint(1, 4),
    ):
        if field in ("local_datasets", "local_eval_datasets"):
            body[field] = rng.sample(paths, rng.randint(1, 2))
        elif field in ("learning_rate", "batch_size"):
            body[field] = junk(rng)
        else:
            body[field] = rng.choice(paths)
    return json.dumps(body)  # NaN / Infinity written as JS literals, as a sloppy client would


def test_two_hundred_random_values_through_every_door(studio, outside, datasets_dir, capfd):
    settings, runner, url = studio
    rng = random.Random(SEED)
    paths = path_pool(settings, outside, datasets_dir)
    for i, output_dir in enumerate((outside, "/", settings.data_dir, settings.uploads_dir, datasets_dir)):
        runner.store.create_run(
            f"job_planted_{i}", {"local_datasets": [alpaca(datasets_dir)]}, str(output_dir), "stopped"
        )
        runner.store.finish_run(f"job_planted_{i}", "stopped", None, str(outside))  # a "checkpoint" outside
    settings.uploads_dir.mkdir(parents=True, exist_ok=True)
    (settings.uploads_dir / "someones-upload.json").write_text("[]")
    protected = {"outside": snapshot(outside), "datasets": snapshot(datasets_dir)}
    client, raw = api(url), RawGradio(logged_in(url))
    doors = {
        "start": raw.fn_index("start"),
        "preview": raw.fn_index(inputs_like="start", outputs=PREVIEW_OUTPUTS),
        "resume": raw.fn_index("resume"),
        "delete": raw.fn_index("delete_run"),
    }
    job_ids = [f"job_planted_{i}" for i in range(5)] + [
        "",
        "../../etc",
        "job_nope",
        "x" * 2000,
        "'; DROP TABLE runs;--",
    ]
    seen: list[str] = []
    for case in range(CASES):
        door = rng.choice(["api", "start", "preview", "resume", "delete"])
        if door == "api":
            answer = client.post(
                "/api/train/start", content=api_body(rng, paths), headers={"Content-Type": "application/json"}
            )
            assert answer.status_code in (200, 400, 422), (case, answer.status_code, answer.text[:300])
            text = answer.text
        elif door in ("start", "preview"):
            upload = rng.choice([None, file_value(rng.choice(paths))])
            typed = ", ".join(rng.sample(paths, rng.randint(0, 2)))
            if door == "start":
                overrides = {"output_dir": rng.choice(["", *paths]), "model_name": rng.choice(["", *paths])}
                data = [upload, typed, rng.choice(["", *paths]), *form_args("", max_steps=2, **overrides)[3:]]
            else:
                data = [
                    upload,
                    typed,
                    "auto",
                    rng.choice(["", "instruction=input", "a"]),
                    rng.choice(["", *paths]),
                    rng.choice([None, 64, 512]),
                    rng.choice(["sft", "dpo", "kto", None]),
                ]
            message = raw.call(doors[door], data, pad=True)
            text = json.dumps(message)
            assert message.get("success") or error_text(message).strip() not in ("", "None"), (case, door, text[:300])
        else:
            message = raw.call(doors[door], [rng.choice(job_ids + [r.job_id for r in runner.store.list_runs()])])
            text = json.dumps(message)
        assert "Traceback" not in text and CANARY not in text, (case, door, text[:500])
        seen.append(door)
        if runner.status().is_training_running:
            idle(runner)
    assert {"api", "start", "preview", "resume", "delete"} <= set(seen)
    assert snapshot(outside) == protected["outside"] and snapshot(datasets_dir) == protected["datasets"]
    assert settings.db_path.is_file() and (settings.uploads_dir / "someones-upload.json").is_file()
    assert (settings.uploads_dir / "to-canary.jsonl").is_symlink()
    assert_no_canary(settings.data_dir)
    err = capfd.readouterr().err
    assert "Traceback" not in err, err[-3000:]  # every refusal a line, never Gradio's printed traceback


def random_input(rng: random.Random, paths: list[str], job_ids: list[str]) -> Any:
    """One value for any input of any event: a path, a run id, a file value or junk."""
    kind = rng.choice(["path", "id", "file", "junk", "checkpoint"])
    if kind == "path":
        return rng.choice(paths)
    if kind == "id":
        return rng.choice(job_ids)
    if kind == "file":
        return file_value(rng.choice(paths))
    if kind == "checkpoint":
        return f"{rng.choice(job_ids)}/checkpoint-{rng.choice(['1', '../../etc', '0' * 50])}"
    value = junk(rng)
    return value if not isinstance(value, float) else str(value)  # the queue's JSON has no NaN literal


def test_two_hundred_random_values_through_the_task_queue_share_and_v1_doors(studio, outside, datasets_dir, capfd):
    """The same fuzz at the doors that serve and export: /v1 (chat, model lookup), share links (API, the
    scoped /s/ routes, the page's share events), export and evaluate (API and page), and the queue
    (API add / remove / move, the page's queue add): raw HTTP and raw Gradio queue calls."""
    settings, runner, url = studio
    rng = random.Random(SEED + 1)
    paths = path_pool(settings, outside, datasets_dir)
    for i, output_dir in enumerate((outside, settings.data_dir, datasets_dir)):
        runner.store.create_run(f"job_doors_{i}", {"model_name": str(outside)}, str(output_dir), "completed")
        runner.store.finish_run(f"job_doors_{i}", "completed", None, str(outside))
    job_ids = [f"job_doors_{i}" for i in range(3)] + ["", "../../etc", "job_nope", "x" * 2000, "'; DROP TABLE runs;--"]
    protected = {"outside": snapshot(outside), "datasets": snapshot(datasets_dir)}
    client, raw = api(url), RawGradio(logged_in(url))
    names = ("export", "evaluate", "queue_add", "share_create", "share_revoke", "chat_load", "chat")
    events = {name: raw.fn_index(name) for name in names}
    ok_codes = {200, 400, 401, 403, 404, 409, 413, 422, 429}

    def post(path: str, body: Any):  # NaN / Infinity as JS literals, as a sloppy client would send them
        return client.post(path, content=json.dumps(body), headers={"Content-Type": "application/json"})

    def model_value() -> Any:
        return rng.choice([*job_ids, *paths, junk(rng)])

    def http(door: str):
        if door == "v1_chat":
            body = {"model": model_value(), "messages": rng.choice([[{"role": "user", "content": "hi"}], junk(rng)])}
            return post("/v1/chat/completions", body)
        if door == "v1_model":
            return client.get("/v1/models/" + str(rng.choice([*job_ids, *paths])).lstrip("/"))
        if door == "share_api":
            return post("/api/train/share", {"model": model_value(), "expires_in_hours": junk(rng)})
        if door == "share_scoped":
            token = rng.choice(["0123456789abcdef.forged", "../../etc", "x" * 500, *job_ids[:3]])
            return post(f"/s/{token}/v1/chat/completions", {"model": model_value(), "messages": []})
        if door == "export_api":
            body = {"model": model_value(), "format": rng.choice(["adapter", "merged", "gguf-f16", "x", junk(rng)])}
            return post("/api/train/export", body)
        if door == "evaluate_api":
            body = {"model": model_value(), "datasets": rng.sample(paths, rng.randint(0, 2)), "max_rows": junk(rng)}
            return post("/api/train/evaluate", body)
        if door == "queue_api":
            return client.post(
                "/api/train/queue", content=api_body(rng, paths), headers={"Content-Type": "application/json"}
            )
        queue_id = str(rng.choice(job_ids)).lstrip("/") or "x"
        if door == "queue_remove":
            return client.delete(f"/api/train/queue/{queue_id}")
        return post(f"/api/train/queue/{queue_id}/move", {"position": junk(rng)})

    http_doors = ["v1_chat", "v1_model", "share_api", "share_scoped", "export_api", "evaluate_api", "queue_api"]
    http_doors += ["queue_remove", "queue_move"]
    seen: set[str] = set()
    for case in range(CASES):
        door = rng.choice([*http_doors, *events])
        if door in events:
            inputs = raw.dependencies[events[door]]["inputs"]
            message = raw.call(events[door], [random_input(rng, paths, job_ids) for _ in inputs])
            text = json.dumps(message)
            assert message.get("success") or error_text(message).strip() not in ("", "None"), (case, door, text[:300])
        else:
            answer = http(door)
            assert answer.status_code in ok_codes, (case, door, answer.status_code, answer.text[:300])
            text = answer.text
        assert "Traceback" not in text and CANARY not in text, (case, door, text[:500])
        seen.add(door)
        if runner.status().is_training_running:
            idle(runner)
    assert set(http_doors) | set(events) == seen
    assert snapshot(outside) == protected["outside"] and snapshot(datasets_dir) == protected["datasets"]
    assert settings.db_path.is_file()
    assert_no_canary(settings.data_dir)
    err = capfd.readouterr().err
    assert "Traceback" not in err, err[-3000:]  # every refusal a line, never Gradio's printed traceback
