"""The Runs doors on the whole app with login and token: ``GET /api/train/runs`` filters,
``PATCH /api/train/runs/{job_id}`` (name, note), and the Runs tab's ``compare_runs``, ``run_label``
and filtered ``runs`` events called raw, as an attacker would: unknown or hostile job ids, over-long
names, HTML in a note (kept as text, never markup), bad smoothing; nothing answers with a traceback."""

from __future__ import annotations

import json

import httpx

from tests.e2e.conftest import AUTH, api, logged_in
from tests.support.raw_gradio import RawGradio, error_text
from trainer_core.status import TrainingProgress

HOSTILE = "<img src=x onerror=alert(1)>"


def _plant(
    store, job_id: str, dataset: str, learning_rate: float, end: tuple[str, str] = ("completed", "completed")
) -> None:
    """A finished run with 20 train steps (token counts) and 2 evaluations."""
    if store.get_record(job_id) is not None:
        return
    store.create_run(
        job_id,
        {"local_datasets": [dataset], "learning_rate": learning_rate, "max_steps": 20},
        f"/tmp/{job_id}",
        "training",
    )
    for step in range(1, 21):
        store.add_metric(
            TrainingProgress(
                job_id=job_id,
                step=step,
                total_steps=20,
                loss=2.0 / step,
                num_tokens=64 * step,
                elapsed_seconds=step * 0.5,
            )
        )
        if step % 10 == 0:
            store.add_metric(TrainingProgress(job_id=job_id, step=step, total_steps=20, eval_loss=1.0 + 1 / step))
    store.finish_run(job_id, end[0], None, None, end[1])


def _planted(runner) -> None:
    _plant(runner.store, "job_cmp_a", "/data/identity.json", 1e-4)
    _plant(runner.store, "job_cmp_b", "/data/alpaca_en_demo.json", 5e-4, ("stopped", "cancelled"))


def test_runs_filters_and_patch_name_note(studio):
    _, runner, url = studio
    _planted(runner)
    client = api(url)

    def ids(**params):
        return [
            r["job_id"]
            for r in client.get("/api/train/runs", params=params).json()
            if r["job_id"].startswith("job_cmp_")
        ]

    assert ids() == ["job_cmp_b", "job_cmp_a"]
    assert ids(status="cancelled") == ["job_cmp_b"] and ids(status="completed") == ["job_cmp_a"]
    assert ids(dataset="IDENTITY") == ["job_cmp_a"] and ids(name="cmp_b") == ["job_cmp_b"]
    for bad in ({"status": "<b>"}, {"name": "n" * 201}, {"limit": 0}):
        assert client.get("/api/train/runs", params=bad).status_code == 422, bad

    answer = client.patch("/api/train/runs/job_cmp_a", json={"name": " lr 1e-4 ", "note": HOSTILE})
    assert answer.status_code == 200, answer.text
    assert (answer.json()["name"], answer.json()["note"]) == ("lr 1e-4", HOSTILE) and "metrics" not in answer.json()
    assert client.patch("/api/train/runs/job_cmp_a", json={"note": "kept name"}).json()["name"] == "lr 1e-4"
    assert ids(name="LR 1E") == ["job_cmp_a"]
    run = client.get("/api/train/runs/job_cmp_a").json()
    assert (run["name"], run["note"]) == ("lr 1e-4", "kept name")
    assert client.patch("/api/train/runs/job_nope", json={"name": "x"}).status_code == 404
    for body in ({"name": "n" * 81}, {"note": "n" * 2001}, {"name": "a\nb"}, {"name": 5}, {"label": "x"}, []):
        refused = client.patch("/api/train/runs/job_cmp_a", json=body)
        assert refused.status_code == 422 and "Traceback" not in refused.text, (body, refused.text)
    assert httpx.patch(url + "/api/train/runs/job_cmp_a", json={"name": "x"}, timeout=30).status_code == 401
    assert client.get("/api/train/runs/job_cmp_a").json()["name"] == "lr 1e-4"  # the refusals changed nothing
    assert AUTH  # (the token header the api client sends)


def test_compare_route_gives_the_diff_and_curves(studio):
    _, runner, url = studio
    _planted(runner)
    client = api(url)
    answer = client.get("/api/train/runs/compare", params={"job_ids": "job_cmp_a, job_cmp_b", "smoothing": 0.5})
    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert [row[0] for row in body["rows"]][:2] == ["status", "learning_rate"] and len(body["columns"]) == 3
    (a, b) = body["curves"]
    assert a["job_id"] == "job_cmp_a" and a["raw"][0] == list(range(1, 21)) and a["eval"] == [[10, 20], [1.1, 1.05]]
    assert a["smoothed"][1][0] == 2.0 and a["smoothed"][1][1] != a["raw"][1][1]  # EMA: debiased start, then smoothed
    tokens = client.get("/api/train/runs/compare", params={"job_ids": "job_cmp_a", "x_axis": "tokens"}).json()
    assert tokens["curves"][0]["raw"][0][:2] == [64, 128]
    eleven = ",".join(f"job_{i}" for i in range(11))
    for params, code in (
        ({"job_ids": "job_nope"}, 404),
        ({"job_ids": ","}, 422),
        ({"job_ids": eleven}, 422),
        ({"job_ids": "job_cmp_a", "smoothing": 1}, 422),
        ({"job_ids": "job_cmp_a", "x_axis": "epoch"}, 422),
        ({}, 422),
        ({"job_ids": "x" * 2001}, 422),
    ):
        refused = client.get("/api/train/runs/compare", params=params)
        assert refused.status_code == code, (params, refused.status_code, refused.text[:200])


def test_compare_label_and_filter_events_called_raw(studio):
    _, runner, url = studio
    _planted(runner)
    raw = RawGradio(logged_in(url))
    compare, label, runs = raw.fn_index("compare_runs"), raw.fn_index("run_label"), raw.fn_index("runs")

    answer = raw.call(compare, [["job_cmp_a", "job_cmp_b"], "step", 0.6])
    assert answer["success"], error_text(answer)
    plot, diff = answer["output"]["data"]
    figure = json.loads(plot["plot"])
    assert {t["legendgroup"] for t in figure["data"]} == {"job_cmp_a", "job_cmp_b"} and len(figure["data"]) == 6
    settings = [row[0] for row in diff["data"]]
    assert settings[:2] == ["status", "learning_rate"] and "max_steps" not in settings and "final loss" in settings
    tokens = raw.call(compare, [["job_cmp_a"], "tokens", 0])
    assert tokens["success"] and json.loads(tokens["output"]["data"][0]["plot"])["data"][0]["x"][:2] == [64, 128]

    for job_ids, x_axis, smoothing in (
        [["job_nope"], "step", 0.5],
        [[HOSTILE], "step", 0.5],
        [["x" * 5000], "step", 0],
        [["job_cmp_a"], "step", 7],
        [["job_cmp_a"], "epoch", 0],
        [[f"job_{i}" for i in range(11)], "step", 0],
    ):
        refused = raw.call(compare, [job_ids, x_axis, smoothing])
        text = json.dumps(refused)
        assert not refused["success"] and "Traceback" not in text and HOSTILE not in text, (job_ids, text[:300])

    saved = raw.call(label, ["job_cmp_b", HOSTILE, "<script>alert(2)</script>", "", "all", ""])
    assert saved["success"], error_text(saved)
    table, picker = saved["output"]["data"]
    row = next(r for r in table["data"] if r[0] == "job_cmp_b")
    assert row[table["headers"].index("name")] == HOSTILE  # a plain-text cell: shown as typed, not as markup
    assert runner.store.get_record("job_cmp_b").note == "<script>alert(2)</script>"
    for args in (
        ["job_nope", "x", "", "", "all", ""],
        ["job_cmp_b", "n" * 81, "", "", "all", ""],
        ["job_cmp_b", "x", "n" * 2001, "", "all", ""],
        ["", "x", "", "", "all", ""],
    ):
        refused = raw.call(label, args)
        assert not refused["success"] and "Traceback" not in json.dumps(refused), (args[:2], refused)
    assert runner.store.get_record("job_cmp_b").name == HOSTILE  # unchanged by the refusals

    filtered = raw.call(runs, ["", "cancelled", "alpaca"])
    assert filtered["success"] and [r[0] for r in filtered["output"]["data"][0]["data"]] == ["job_cmp_b"]
    for args in (["", "<b>", ""], ["n" * 300, "all", ""], [None, None, None]):
        answer = raw.call(runs, args)
        assert "Traceback" not in json.dumps(answer), (args, answer)
