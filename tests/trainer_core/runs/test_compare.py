"""Comparing runs: TensorBoard's EMA, the batch min/max downsampling (same points as the
live charts' ``MinMaxSeries``), series against steps and tokens, the settings diff, the overlay
figure, run names / notes / filters in the store, an old database gaining the new columns, and the
Runs tab's compare and label handlers with bad values."""

import json
import math
import random
import sqlite3
from types import SimpleNamespace

import gradio as gr
import pytest

from tests.trainer_core.runs.test_store import OLD_SCHEMA
from trainer_core.runs import compare
from trainer_core.runs.minmax import MinMaxSeries
from trainer_core.runs.store import NAME_MAX_CHARS, NOTE_MAX_CHARS, RunStore
from trainer_core.status import TrainingProgress
from ui import compare_panel, compare_view, run_handlers


def _run(store, job_id, request, losses, evals=(), tokens_per_step=100, phase="completed", end_reason="completed"):
    store.create_run(job_id, request, f"/runs/{job_id}", "training")
    for step, loss in enumerate(losses, start=1):
        store.add_metric(
            TrainingProgress(
                job_id=job_id,
                step=step,
                total_steps=len(losses),
                loss=loss,
                elapsed_seconds=float(step),
                num_tokens=tokens_per_step * step,
            )
        )
    for step, loss in evals:
        store.add_metric(TrainingProgress(job_id=job_id, step=step, total_steps=len(losses), eval_loss=loss))
    store.finish_run(
        job_id, phase, None, None, end_reason, best_eval_loss=min((loss for _, loss in evals), default=None)
    )


def test_ema_is_tensorboards_debiased_ema():
    # w = 0.5: last = 0.5, 1.25, 2.125; debiased by 1 - 0.5**n = 0.5, 0.75, 0.875
    assert compare.ema([1.0, 2.0, 3.0], 0.5) == pytest.approx([1.0, 5 / 3, 17 / 7])
    # w = 0.9 on [10, 0]: 1.0 / 0.1 = 10; (0.9) / 0.19
    assert compare.ema([10.0, 0.0], 0.9) == pytest.approx([10.0, 0.9 / 0.19])
    assert compare.ema([1.0, 2.0], 0.0) == [1.0, 2.0]  # no smoothing
    assert compare.ema([2.0, 2.0, 2.0], 0.9) == [2.0, 2.0, 2.0]  # constant: as TensorBoard, untouched
    smoothed = compare.ema([1.0, math.nan, 3.0], 0.5)  # a NaN passes through and does not count
    assert smoothed[0] == 1.0 and math.isnan(smoothed[1]) and smoothed[2] == pytest.approx(1.75 / 0.75)
    assert compare.ema([], 0.5) == []
    for bad in (-0.1, 1.0, 1.5):
        with pytest.raises(ValueError, match="smoothing weight"):
            compare.ema([1.0, 2.0], bad)


@pytest.mark.parametrize("n", [0, 1, 7, 250, 251, 500, 777, 4096, 10_001])
def test_batch_downsampling_gives_the_live_charts_points(n):
    rng = random.Random(n)
    xs, ys = list(range(1, n + 1)), [rng.choice([rng.random(), 0.5, 2.0]) for _ in range(n)]  # ties included
    live = MinMaxSeries(compare.COMPARE_POINTS)
    for x, y in zip(xs, ys):
        live.append(x, y)
    assert compare.downsample(xs, ys) == live.points()
    assert len(compare.downsample(xs, ys)[0]) <= compare.COMPARE_POINTS


def test_series_against_steps_and_tokens():
    rows = [(1, 2.0, None, 100), (2, 1.5, None, 200), (2, None, 1.7, None), (3, 1.2, None, None), (4, 1.0, None, 400)]
    steps = compare.series_of("job_a", "a", rows, "step")
    assert (steps.x, steps.loss, steps.eval_x, steps.eval_loss) == ([1, 2, 3, 4], [2.0, 1.5, 1.2, 1.0], [2], [1.7])
    tokens = compare.series_of("job_a", "a", rows, "tokens")  # step 3 counted no tokens: left out
    assert (tokens.x, tokens.loss, tokens.eval_x, tokens.eval_loss) == ([100, 200, 400], [2.0, 1.5, 1.0], [200], [1.7])
    with pytest.raises(ValueError, match="x_axis"):
        compare.series_of("job_a", "a", rows, "epoch")


def test_config_diff_lists_only_differing_settings_then_outcomes(tmp_path):
    store = RunStore(tmp_path / "studio.db")
    _run(
        store,
        "job_a",
        {"learning_rate": 1e-4, "max_steps": 3, "lora_r": 16, "local_datasets": ["/d/a.json"]},
        [2.0, 1.5, 1.25],
        evals=[(3, 1.4)],
    )
    _run(
        store,
        "job_b",
        {"learning_rate": 2e-4, "max_steps": 3, "lora_r": 16, "local_datasets": ["/d/a.json"], "neftune": 5},
        [2.0, 1.0, 0.5],
        phase="stopped",
        end_reason="cancelled",
    )
    store.set_label("job_a", name="baseline")
    runs = [store.get_record("job_a"), store.get_record("job_b")]
    columns, rows = compare.config_diff(runs)
    assert columns == ["setting", "baseline", "job_b"]
    table = {row[0]: row[1:] for row in rows}
    assert [row[0] for row in rows] == ["status", "learning_rate", "neftune", *compare.SUMMARY_ROWS]
    assert table["status"] == ["completed", "cancelled"]
    assert table["learning_rate"] == ["0.0001", "0.0002"] and table["neftune"] == ["—", "5"]
    assert table["final loss"] == ["1.25", "0.5"] and table["best eval loss"] == ["1.4", "—"]
    assert table["training time (s)"] == ["3.0", "3.0"] and table["tokens/s"] == ["100.0", "100.0"]
    assert all(isinstance(cell, str) for row in rows for cell in row)


def test_an_embedding_runs_last_retrieval_metrics_line_up_beside_a_text_run(tmp_path):
    store = RunStore(tmp_path / "studio.db")
    _run(store, "job_text", {"learning_rate": 1e-4}, [2.0, 1.0], evals=[(2, 1.1)])
    _run(store, "job_emb", {"learning_rate": 1e-4, "is_embedding": True}, [2.0, 1.0])
    for step, ndcg in ((1, 0.5), (2, 0.625)):  # the last logged value counts
        store.add_metric(
            TrainingProgress(
                job_id="job_emb", step=step, total_steps=2, eval_loss=1.0, eval_ndcg_at_10=ndcg, eval_recall_at_1=0.25
            )
        )
    runs = [store.get_record("job_text"), store.get_record("job_emb")]
    finals = compare.final_values(store, runs)
    assert finals == [{}, {"eval_ndcg_at_10": 0.625, "eval_recall_at_1": 0.25}]
    table = {row[0]: row[1:] for row in compare.config_diff(runs, finals)[1]}
    assert [name for name in table if name.startswith("eval_")] == ["eval_ndcg_at_10", "eval_recall_at_1"]
    assert table["eval_ndcg_at_10"] == ["—", "0.625"] and table["eval_recall_at_1"] == ["—", "0.25"]
    diff = compare_panel.compare_runs(_ctx(store), ["job_text", "job_emb"], "step", 0)[1]
    assert diff.set_index("setting").loc["eval_ndcg_at_10"].tolist() == ["—", "0.625"]
    idle = SimpleNamespace(is_training_running=False, job_id=None)
    ctx = SimpleNamespace(runner=SimpleNamespace(store=store, status=lambda with_history=True: idle), tasks=None)
    summary = run_handlers.show_run(ctx, "job_emb")[0]
    assert "Held-out retrieval at step 2: eval_ndcg_at_10 0.6250 · eval_recall_at_1 0.2500" in summary
    assert "Held-out retrieval" not in run_handlers.show_run(ctx, "job_text")[0]
    with pytest.raises(ValueError, match="not a logged metric: progress_json"):
        store.last_values("job_emb", ("progress_json",))


def test_overlay_figure_one_colour_per_run_raw_faint_names_escaped():
    series = [
        compare.RunSeries("job_a", "<b>bold</b>", [1, 2, 3], [3.0, 2.0, 1.0], [3], [1.5]),
        compare.RunSeries("job_b", "b", [1, 2], [2.0, 1.0]),
    ]
    figure = json.loads(compare_view.overlay_figure(compare.curves(series, 0.6), "step", 0.6).to_json())
    traces = figure["data"]
    assert [t["name"] for t in traces] == [
        "&lt;b&gt;bold&lt;/b&gt; raw",
        "&lt;b&gt;bold&lt;/b&gt;",
        "&lt;b&gt;bold&lt;/b&gt; eval",
        "b raw",
        "b",
    ]
    assert traces[0]["opacity"] == compare_view.RAW_OPACITY and not traces[0]["showlegend"]
    colours = [t["line"]["color"] for t in traces]
    assert colours[0] == colours[1] == colours[2] != colours[3]
    assert traces[2]["line"]["dash"] == "dash" and "markers" in traces[2]["mode"]
    plain = json.loads(compare_view.overlay_figure(compare.curves(series, 0.0)).to_json())["data"]
    assert [t["name"] for t in plain] == [
        "&lt;b&gt;bold&lt;/b&gt;",
        "&lt;b&gt;bold&lt;/b&gt; eval",
        "b",
    ]  # no EMA traces
    empty = json.loads(compare_view.overlay_figure([], "tokens").to_json())
    assert empty["data"] == [] and empty["layout"]["annotations"][0]["text"] == "no token counts logged"


def test_ten_runs_of_ten_thousand_steps_stay_under_500_kb():
    rng = random.Random(0)
    series = [
        compare.RunSeries(
            f"job_{r}",
            f"run {r}",
            list(range(1, 10_001)),
            [2.0 * math.exp(-s / 5000) + rng.random() * 0.2 for s in range(1, 10_001)],
            list(range(100, 10_001, 100)),
            [1.5] * 100,
        )
        for r in range(10)
    ]
    text = compare_view.overlay_figure(compare.curves(series, 0.6), "step", 0.6).to_json()
    assert len(text) <= 500_000 and len(json.loads(text)["data"]) == 30


def test_names_notes_and_filters_in_the_store(tmp_path):
    store = RunStore(tmp_path / "studio.db")
    _run(store, "job_a", {"local_datasets": ["/data/identity.json"]}, [1.0])
    _run(
        store,
        "job_b",
        {"local_datasets": ["/data/alpaca.json"], "hf_dataset": "org/Chat"},
        [1.0],
        phase="stopped",
        end_reason="cancelled",
    )
    assert store.set_label("job_a", name="  Baseline LR  ", note="line one\nline <b>two</b>")
    run = store.get_record("job_a")
    assert (run.name, run.note) == ("Baseline LR", "line one\nline <b>two</b>")  # stored as typed, stripped
    assert store.set_label("job_a", note="") and store.get_record("job_a").note is None  # cleared; name kept
    assert store.get_record("job_a").name == "Baseline LR"
    assert not store.set_label("job_nope", name="x")
    with pytest.raises(ValueError, match=f"at most {NAME_MAX_CHARS}"):
        store.set_label("job_a", name="n" * (NAME_MAX_CHARS + 1))
    with pytest.raises(ValueError, match=f"at most {NOTE_MAX_CHARS}"):
        store.set_label("job_a", note="n" * (NOTE_MAX_CHARS + 1))
    with pytest.raises(ValueError, match="control or invisible"):
        store.set_label("job_a", name="two\nlines")
    ids = lambda **filters: [r.job_id for r in store.list_runs(**filters)]  # noqa: E731
    assert ids(name="baseline") == ["job_a"] and ids(name="JOB_B") == ["job_b"]
    assert ids(status="cancelled") == ["job_b"] and ids(status="completed") == ["job_a"] and ids(status="stopped") == []
    assert ids(dataset="identity") == ["job_a"] and ids(dataset="org/chat") == ["job_b"]
    assert ids(name="job", dataset="alpaca", status="cancelled") == ["job_b"] and ids(name="zzz") == []
    assert ids(name="job", limit=1) == ["job_b"]


def test_an_old_database_gains_name_note_and_lean_metric_columns(tmp_path):
    db = sqlite3.connect(tmp_path / "studio.db")
    db.executescript(OLD_SCHEMA)
    progress = TrainingProgress(job_id="job_old", step=1, total_steps=2, loss=1.5, num_tokens=64)
    db.execute(
        "INSERT INTO metrics (job_id, seq, step, progress_json) VALUES ('job_old', 1, 1, ?)",
        (progress.model_dump_json(),),
    )
    db.commit()
    db.close()
    store = RunStore(tmp_path / "studio.db")
    check = sqlite3.connect(tmp_path / "studio.db")
    assert {"name", "note"} <= {row[1] for row in check.execute("PRAGMA table_info(runs)")}
    assert {"loss", "eval_loss", "num_tokens", "lean"} <= {
        row[1] for row in check.execute("PRAGMA table_info(metrics)")
    }
    (old,) = store.list_runs()
    assert (old.name, old.note) == (None, None)
    assert store.set_label("job_old", name="old one") and store.list_runs(name="old")[0].job_id == "job_old"
    store.add_metric(
        TrainingProgress(job_id="job_old", step=2, total_steps=2, loss=1.0, eval_loss=None, num_tokens=128)
    )
    assert store.loss_rows("job_old") == [(1, 1.5, None, 64), (2, 1.0, None, 128)]  # old row from its JSON
    assert store.loss_rows("job_nope") == []


def _ctx(store):
    return SimpleNamespace(runner=SimpleNamespace(store=store), tasks=None, settings=None)


def test_compare_and_label_handlers_refuse_bad_values(tmp_path):
    store = RunStore(tmp_path / "studio.db")
    _run(store, "job_a", {"learning_rate": 1e-4}, [2.0, 1.0], evals=[(2, 1.1)])
    _run(store, "job_b", {"learning_rate": 3e-4}, [2.0, 0.5])
    ctx = _ctx(store)
    figure, diff = compare_panel.compare_runs(ctx, ["job_a", "job_b"], "tokens", 0.5)
    assert {t.legendgroup for t in figure.data} == {"job_a", "job_b"}
    assert figure.layout.xaxis.title.text == "input tokens seen"
    assert list(diff["setting"])[:2] == ["status", "learning_rate"]
    assert compare_panel.compare_runs(ctx, [], "step", 0)[1].empty
    bad_calls = [
        (["job_nope"], "step", 0.5, "No run"),
        (["<script>x</script>"], "step", 0.5, "&lt;script&gt;"),
        (["job_a"], "epoch", 0.5, "x axis"),
        (["job_a"], "step", 1.5, "Smoothing"),
        (["job_a"], "step", "0.5", "Smoothing"),
        (["job_a"], "step", math.nan, "Smoothing"),
        ([f"job_{i}" for i in range(11)], "step", 0, "at most 10"),
        ([{"a": 1}], "step", 0, "job ids"),
        (["x" * 5000], "step", 0, "No run"),
    ]
    for job_ids, x_axis, smoothing, said in bad_calls:
        with pytest.raises(gr.Error, match=said):
            compare_panel.compare_runs(ctx, job_ids, x_axis, smoothing)
    table, picker = compare_panel.save_label(ctx, "job_a", "<img src=x onerror=alert(1)>", "**note**", "", "all", "")
    assert table.loc[table["job_id"] == "job_a", "name"].item() == "<img src=x onerror=alert(1)>"  # text, as typed
    assert ("<img src=x onerror=alert(1)>", "job_a") in picker["choices"]
    assert compare_panel.label_fields(ctx, "job_a") == ("<img src=x onerror=alert(1)>", "**note**")
    assert compare_panel.label_fields(ctx, "job_nope") == ("", "")
    for job_id, name, note, said in [
        ("job_nope", "a", "", "No run"),
        ("", "a", "", "Click a run"),
        ("job_a", "n" * 81, "", "at most 80"),
        ("job_a", None, "", "must be text"),
        ("job_a", "a\nb", "", "control or invisible"),
    ]:
        with pytest.raises(gr.Error, match=said):
            compare_panel.save_label(ctx, job_id, name, note)
    filtered = compare_panel.runs_table(ctx, "img", "completed", "")
    assert list(filtered["job_id"]) == ["job_a"]
    with pytest.raises(gr.Error, match="Unknown status"):
        compare_panel.runs_table(ctx, "", "<b>", "")


def _awkward_run(store, job_id):
    """A run with NaN losses, eval-only events, train events without token counts, an eval event
    before any counted train event, a train event that also carries an eval loss, and an old row
    (no lean columns: read from its JSON)."""
    store.create_run(job_id, {}, f"/runs/{job_id}", "training")
    events = [
        dict(step=1, eval_loss=2.5),
        dict(step=1, loss=2.0),
        dict(step=2, loss=math.nan, num_tokens=200),
        dict(step=3, loss=1.5, num_tokens=300),
        dict(step=3, eval_loss=1.6),
        dict(step=4, loss=math.inf),
        dict(step=5, loss=1.2, eval_loss=1.3, num_tokens=500),
        dict(step=6, loss=1.1, num_tokens=0),
        dict(step=6, eval_loss=1.05),
    ]
    for event in events:
        store.add_metric(TrainingProgress(job_id=job_id, total_steps=6, **event))
    old = TrainingProgress(job_id=job_id, step=7, total_steps=7, loss=1.0, num_tokens=700)
    store._write(
        "INSERT INTO metrics (job_id, seq, step, progress_json) VALUES (?, 100, 7, ?)", (job_id, old.model_dump_json())
    )


@pytest.mark.parametrize("x_axis", compare.X_AXES)
def test_packed_series_equal_the_row_path(tmp_path, x_axis):
    store = RunStore(tmp_path / "studio.db")
    _awkward_run(store, "job_a")
    _run(store, "job_b", {}, [2.0, 1.0, 0.5], evals=[(2, 1.1)])
    store.create_run("job_empty", {}, "/runs/e", "training")
    live_rows = store.loss_rows("job_a")
    assert store.packed_series("job_a") is None  # live: read by rows
    for job_id in ("job_a", "job_empty"):
        store.finish_run(job_id, "completed", None, None, "completed")
    for job_id in ("job_a", "job_b", "job_empty"):
        rows, packed = store.loss_rows(job_id), store.packed_series(job_id)
        assert packed.rows() == rows
        by_rows = compare.series_of(job_id, "x", rows, x_axis)
        by_pack = compare.series_of_packed(job_id, "x", packed, x_axis)
        assert by_pack == by_rows and all(type(a) is type(b) for a, b in zip(by_pack.x, by_rows.x))
    assert store.loss_rows("job_a") == live_rows and len(live_rows) == 10
    runs = [store.get_record(j) for j in ("job_a", "job_b")]
    assert compare.load_series(store, runs, x_axis) == [
        compare.series_of(r.job_id, r.job_id, store.loss_rows(r.job_id), x_axis) for r in runs
    ]
    assert compare.SeriesCache().load(store, runs, x_axis) == compare.load_series(store, runs, x_axis)
    with pytest.raises(ValueError, match="x_axis"):
        compare.series_of_packed("job_a", "a", store.packed_series("job_a"), "epoch")


def test_run_summary_shows_name_and_note_as_plain_text(tmp_path):
    from ui import run_handlers

    store = RunStore(tmp_path / "studio.db")
    _run(store, "job_a", {}, [2.0, 1.0])
    idle = SimpleNamespace(is_training_running=False, job_id=None)
    ctx = SimpleNamespace(runner=SimpleNamespace(store=store, status=lambda with_history=True: idle), tasks=None)
    plain = run_handlers.show_run(ctx, "job_a")[0]
    assert plain.startswith("**job_a**") and "Note" not in plain  # no label: as before
    store.set_label(
        "job_a",
        name="**big** [x](https://evil.example) <img src=x onerror=alert(1)>",
        note="# heading\n- item\n\n    code `tick` & 1. <b>b</b>",
    )
    summary = run_handlers.show_run(ctx, "job_a")[0]
    name, note = summary.split("\n\n")[0], summary.split("**Note:**  \n")[1].split("\n\n")[0]
    assert name == r"### \*\*big\*\* \[x\]\(https\:\/\/evil\.example\) &lt;img src\=x onerror\=alert\(1\)&gt;"
    assert note == "\\# heading  \n\\- item  \ncode \\`tick\\` &amp; 1\\. &lt;b&gt;b&lt;\\/b&gt;"
    assert "<img" not in summary and "<b>" not in summary and "**job_a**" in summary


def _loop_ema(values, weight):
    """TensorBoard's loop, value by value (the reference ``compare.ema`` is checked against)."""
    out, last, decay = [], 0.0, 1.0
    for value in values:
        if math.isfinite(value):
            last = last * weight + (1 - weight) * value
            decay *= weight
            out.append(last / (1 - decay))
        else:
            out.append(value)
    return out


@pytest.mark.parametrize("weight", [1e-6, 0.1, 0.6, 0.9, 0.99])
def test_vectorised_ema_agrees_with_the_loop(weight):
    rng = random.Random(int(weight * 1000))
    values = [rng.choice([rng.gauss(2.0, 1.0), math.nan, math.inf, 50.0]) for _ in range(10_007)]
    got, want = compare.ema(values, weight), _loop_ema(values, weight)
    assert len(got) == len(want) and all(type(v) is float for v in got)
    assert [math.isfinite(v) for v in got] == [math.isfinite(v) for v in want]
    assert [v for v in got if not math.isfinite(v)].count(math.inf) == values.count(math.inf)
    assert all(g == pytest.approx(w, rel=1e-12, abs=1e-12) for g, w in zip(got, want) if math.isfinite(w))


def test_a_grpo_runs_view_has_its_rewards_chart_and_an_sft_run_none(tmp_path):
    """The Runs tab shows a finished GRPO run's rewards (mean and each function) beside its loss,
    as the live monitor did; an SFT run's view keeps that chart hidden."""
    from ui import run_handlers

    store = RunStore(tmp_path / "studio.db")
    _run(store, "job_sft", {}, [2.0, 1.0])
    store.create_run("job_grpo", {"training_method": "grpo"}, "/runs/job_grpo", "training")
    for step, reward in enumerate([0.25, 0.5, 0.75], start=1):
        store.add_metric(
            TrainingProgress(
                job_id="job_grpo",
                step=step,
                total_steps=3,
                loss=0.01,
                reward=reward,
                reward_std=0.1,
                rewards={"numeric_match:answer": reward},
            )
        )
    store.finish_run("job_grpo", "completed", None, None, "completed")
    idle = SimpleNamespace(is_training_running=False, job_id=None)
    ctx = SimpleNamespace(runner=SimpleNamespace(store=store, status=lambda with_history=True: idle), tasks=None)
    plot = run_handlers.show_run(ctx, "job_grpo")[5]
    assert plot["visible"] and plot["value"] is not None  # a gr.update: the figure, serialised when sent
    names = {trace.name for trace in plot["value"].data}
    assert {"numeric_match:answer"} <= names, names
    assert run_handlers.show_run(ctx, "job_sft")[5]["visible"] is False
