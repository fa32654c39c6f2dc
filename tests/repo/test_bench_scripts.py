"""Benchmark scripts run in --quick mode so they cannot rot (figures are reported, not asserted;
what is asserted is that each script measured what it says)."""

import pytest

from bench import charts as chart_bench
from bench import compare as compare_bench


def test_chart_bench_quick(capsys):
    report = chart_bench.main(["--quick"])
    assert [r["steps"] for r in report["results"]] == [1_000, 10_000]
    assert all(r["update_ms"] > 0 and r["wire_kb"] > 0 and r["append_us"] > 0 for r in report["results"])
    assert '"bench": "charts"' in capsys.readouterr().out


def test_compare_bench_quick(capsys):
    report = compare_bench.main(["--quick"])
    assert (report["runs"], report["steps"]) == (2, 1_000)
    timed = [key for key in report if key.endswith("_ms")]
    assert {
        "figure_from_series_ms",
        "figure_from_store_ms",
        "figure_from_store_cached_ms",
        "figure_from_store_unpacked_ms",
        "finish_run_ms",
    } <= set(timed)
    assert all(0 < report[key]["min"] <= report[key]["median"] <= report[key]["max"] for key in timed)
    assert 0 < report["figure_json_kb"] <= 500
    assert '"bench": "compare"' in capsys.readouterr().out


@pytest.mark.slow
def test_throughput_bench_quick(capsys, tiny_model_dir):
    """On the tiny model (the script is checked, not the figures): both sides in this process."""
    from bench import throughput

    report = throughput.main(["--quick", "--model", str(tiny_model_dir)])
    ours, trl = report["runs"]
    assert (ours["side"], trl["side"]) == ("ours", "trl")
    assert ours["samples"] == trl["samples"] == 4 and ours["tokens_real"] == trl["tokens_real"]  # same batches
    assert ours["padding_fraction"] == 0 and trl["padding_fraction"] > 0.1
    assert ours["losses"][0] == pytest.approx(trl["losses"][0], abs=2e-3)  # same objective, same start
    assert 0 < ours["mfu"] < 1 and report["median_ratio"] > 0
    assert "vs bare TRL" in capsys.readouterr().out


@pytest.mark.slow
def test_latency_bench_quick(capsys, tiny_model_dir):
    """On the tiny model (the script is checked, not the figures)."""
    from bench import latency

    report = latency.main(["--quick", "--port", "7881", "--model", str(tiny_model_dir)])
    assert 0 < report["page_served_s"] and report["idle_rss_mib"] > 50
    for kind in ("cold", "warm", "again"):
        phases = report[f"phase_began_{kind}_s"]
        assert phases["loading_model"] <= phases["training"] <= report[f"first_step_{kind}_s"]
    assert report["standby_ready_s"] > 0 and report["rss_with_standby_mib"] > report["idle_rss_mib"]
    assert report["cancel_s"]["training"] is not None and report["cancel_s"]["training"] > 0
    assert "first step" in capsys.readouterr().out


@pytest.mark.slow
def test_ui_overhead_bench_quick(capsys, tiny_model_dir):
    """On the tiny model: the app, a CLI run and two API runs watched by tabs, about 45 s."""
    from bench import ui_overhead

    report = ui_overhead.main(["--quick", "--port", "7882", "--model", str(tiny_model_dir)])
    assert set(report["median_seconds_per_step"]) == {"cli", "api_1_tab", "api_3_tabs"}
    assert all(s > 0 for s in report["median_seconds_per_step"].values())
    assert report["fewest_updates_per_tab"] >= 2  # every tab really streamed the run
    assert "tabs" in capsys.readouterr().out


@pytest.mark.timeout(900)  # several real-model processes in turn
@pytest.mark.slow
def test_chat_bench_quick(capsys, trained_run):
    from bench import chat

    report = chat.main(["--quick", "--data-dir", str(trained_run.settings.data_dir)])
    assert report["run"] == trained_run.job_id
    assert report["tokens"]["chat"] == report["tokens"]["plain"] == 32  # the same greedy answer on both sides
    assert all(s > 0 for s in [*report["chat_tokens_per_s"], *report["plain_tokens_per_s"], *report["ttft_s"]])
    assert report["cold_load_s"] > 0 and report["base_load_s"] > 0
    # base vs tuned holds one set of base weights: far less than a second copy more than the base alone
    assert report["rss_base_vs_tuned_mib"] - report["rss_base_alone_mib"] < report["weights_mib"] / 2
    assert "tokens/s" in capsys.readouterr().out


@pytest.mark.timeout(900)  # several real-model processes in turn
@pytest.mark.slow
def test_export_bench_runs(capsys, trained_run):
    """The export bench on the session's real 3-step run (``trained_run``: the run the bench trains
    for itself without ``--data-dir``, made once for every test that needs it), merged float32 only
    (figures are reported, not asserted; the full run with GGUF is in docs/BENCHMARKS.md)."""
    from bench import export

    report = export.main(
        ["--data-dir", str(trained_run.settings.data_dir), "--merged-dtypes", "float32", "--skip-gguf"]
    )
    assert report["run"] == trained_run.job_id
    (merged,) = report["exports"]
    check = merged["files"][0]["check"]
    assert merged["passed"] and merged["seconds"] > 0 and check["forced_equal"] == check["tokens_total"] == 60
    assert "target <= 120 s" in capsys.readouterr().out


@pytest.mark.slow
def test_preference_bench_quick(capsys, tiny_model_dir):
    """On the tiny model: both sides in this process (the script is checked, not the figures)."""
    from bench import preference

    report = preference.main(["--quick", "--model", str(tiny_model_dir)])
    ours, trl = report["runs"]
    assert (ours["side"], trl["side"]) == ("ours", "trl") and len(ours["losses"]) == len(trl["losses"]) == 2
    assert ours["losses"][0] == pytest.approx(trl["losses"][0], abs=1e-3)  # DPO starts at ln 2 on both sides
    assert report["speed_ratio"] > 0 and report["last5_loss_gap"] >= 0
    assert '"bench": "preference"' in capsys.readouterr().out


@pytest.mark.slow
def test_grpo_bench_quick(capsys, tiny_model_dir):
    """On the tiny model: our GRPO path and the bare TRL script, 2 steps each, the same rewards."""
    from bench import grpo

    report = grpo.main(["--quick", "--model", str(tiny_model_dir)])
    ours, trl = report["runs"]
    assert (ours["side"], trl["side"]) == ("ours", "trl") and len(ours["rewards"]) == len(trl["rewards"]) == 2
    assert report["speed_ratio"] > 0 and report["same_rewards"]  # one seed: the same completions, the same rewards
    assert '"bench": "grpo"' in capsys.readouterr().out


@pytest.mark.slow
def test_scaling_bench_quick(capsys, tiny_model_dir):
    """On the tiny model: one process, then two through torchrun."""
    from bench import scaling

    report = scaling.main(["--quick", "--model", str(tiny_model_dir)])
    one, two = report["runs"]
    assert (one["processes"], two["processes"]) == (1, 2) and one["steps"] == two["steps"] == 3
    assert two["samples_per_second"] == pytest.approx(2 * two["samples_per_second_per_process"], rel=0.01)
    assert report["speedup"] > 0 and report["last5_loss_gap"] < 0.05  # the same 3 steps in both
    assert '"bench": "scaling"' in capsys.readouterr().out


@pytest.mark.slow
def test_families_bench_trains_chats_and_exports_the_hardest_families(capsys):
    """GPT-2 (Conv1D), gpt-oss (eager, padded batches, 3-D experts) and Qwen3-MoE (fused experts):
    2 steps, a chat answer tuned and base, a merged export whose check passes."""
    from bench import families

    rows = families.main(["--families", "gpt2", "gpt_oss", "qwen3_moe"])
    assert [r.get("error") for r in rows] == [None, None, None]
    assert all(r["export_passed"] and r["chat_tokens"]["tuned"] > 0 for r in rows)
    by = {r["family"]: r for r in rows}
    assert by["gpt_oss"]["padding_free"] is False and by["gpt_oss"]["expert_parameters"] == 2
    assert by["qwen3_moe"]["expert_parameters"] == 2 and by["gpt2"]["adapted"] == 8
    assert "merged export check" in capsys.readouterr().out


@pytest.mark.slow
def test_vision_bench_quick(capsys, tiny_vl_dir):
    """Our vision path and the bare TRL script, 2 steps each on the tiny Qwen2-VL (the script is
    checked, not the figures)."""
    from bench import vision

    report = vision.main(["--quick", "--model", str(tiny_vl_dir)])
    ours, trl = report["runs"]
    assert (ours["side"], trl["side"]) == ("ours", "trl")
    assert all(run["steps_per_second"] > 0 and run["tokens_per_step"] > 0 for run in report["runs"])
    assert report["speed_ratio"] > 0 and '"bench": "vision"' in capsys.readouterr().out


@pytest.mark.slow
def test_profile_step_bench_lists_the_costliest_operators(capsys, tiny_model_dir):
    """On the tiny model: the per-operator table of a profiled step (the script, not the figures)."""
    from bench import profile_step

    report = profile_step.main(["--model", str(tiny_model_dir), "--steps", "2", "--warmup", "1", "--rows", "8"])
    ops = report["ops"]
    assert len(ops) == 8 and report["seconds_per_step"] > 0
    assert ops == sorted(ops, key=lambda op: op["ms_per_step"], reverse=True)
    assert any(op["op"] in ("aten::mm", "aten::addmm", "aten::bmm") for op in ops)  # the matmuls are there
    assert 0 < sum(op["share"] for op in ops) <= 1.0001
    assert "| Operator | ms / step |" in capsys.readouterr().out


@pytest.mark.slow
def test_gpu_check_runs_both_paths(capsys, tiny_model_dir):
    """The GPU check's script on the CPU (``--device cpu``, the tiny model): the plain path in fp32,
    the default path as this CPU chooses, the same batches, a verdict. Without a GPU and without
    ``--device cpu`` it says so and exits 2."""
    import torch

    from bench import gpu_check
    from trainer_core.models.precision import choose_precision

    if not torch.cuda.is_available():
        assert gpu_check.main(["--steps", "2"]) == 2
    code = gpu_check.main(["--device", "cpu", "--steps", "3", "--model", str(tiny_model_dir)])
    out = capsys.readouterr().out
    report = next(__import__("json").loads(line) for line in out.splitlines() if line.startswith("{"))
    plain, fast = report["runs"]
    assert plain["precision"] == "fp32" and not plain["liger"] and not fast["liger"]  # no Liger on a CPU
    assert fast["precision"] == choose_precision("cpu").dtype
    assert len(plain["losses"]) == len(fast["losses"]) == 3
    assert code == (0 if report["passed"] else 1) and report["passed"]  # tiny model: losses within 0.02


@pytest.mark.slow
def test_compile_steps_bench_measures_a_break_even(capsys, tiny_model_dir):
    """On the tiny model: both runs, the cost and the saving measured (the script, not the figures:
    whether compiling costs more than an eager first step is the machine's load, not the script's,
    so the cost and the saving are checked as computed from the step times each run measured)."""
    from bench import compile_steps

    report = compile_steps.main(["--model", str(tiny_model_dir), "--steps", "4"])
    on, off = report["runs"]["on"], report["runs"]["off"]
    assert on["layers_compiled"] == 2 and off["layers_compiled"] == 0
    assert len(on["step_s"]) == len(off["step_s"]) == 4 and all(t > 0 for t in on["step_s"] + off["step_s"])
    cost, saved = on["step_s"][0] - off["step_s"][0], off["step_s"][3] - on["step_s"][3]  # steps 4..4: one step
    assert report["compile_cost_s"] == round(cost, 1) and report["saved_per_step_s"] == round(saved, 3)
    assert report["break_even_steps"] == (round(cost / saved) if saved > 0 else None)
    assert report["max_loss_gap"] < 0.05
    assert "pays after" in capsys.readouterr().out


@pytest.mark.slow
def test_embedding_bench_quick(capsys, tiny_encoder_dir):
    """On the tiny encoder: one A B pair of 2 steps (both sides in this process); the quality part
    (retrieval before and after training) is run by hand for docs/BENCHMARKS.md."""
    from bench import embedding

    report = embedding.main(["speed", "--quick", "--model", str(tiny_encoder_dir)])
    assert report["ours"]["median_samples_per_s"] > 0 and report["bare"]["median_samples_per_s"] > 0
    assert report["loss_gap"] < 0.02  # the same batches, loss and settings on both sides
    assert "samples/s" in capsys.readouterr().out


def test_speech_bench_quick_tts(capsys, tiny_csm_dir):
    """``bench.speech tts --quick`` on the tiny CSM: one A B pair of 2 steps, both sides in this
    process (no process start): ours and the bare script of transformers' CSM docs score the same
    frames, so their losses are equal step by step."""
    from bench import speech

    report = speech.main(["tts", "--quick", "--model", str(tiny_csm_dir)])["tts"]
    ours, bare = report["runs"]
    assert (ours["side"], bare["side"]) == ("ours", "bare") and ours["samples_per_s"] > 0 < bare["samples_per_s"]
    assert ours["losses"] == pytest.approx(bare["losses"], abs=1e-3) and len(ours["losses"]) == 2
    assert "tts: ours" in capsys.readouterr().out


def test_constrained_bench_quick(capsys, tiny_model_dir):
    """On the tiny model (its noise cannot close the JSON in 24 tokens: ``length``): one A B pair
    of equal lengths, the compile and the library's own cost a token."""
    from bench import constrained

    report = constrained.main(["--quick", "--model", str(tiny_model_dir)])
    free, forced = report["runs"]
    assert (free["side"], forced["side"]) == ("free", "constrained") and free["tokens"] == forced["tokens"]
    assert forced["text"].startswith("<tool_call>\n{") and len(report["pair_ratios"]) == 1
    assert report["first_compile_ms"] > report["new_schema_compile_ms"] > 0
    assert report["libraries"]["llguidance"]["ms_per_token"] > 0  # the others: measured where installed
    assert '"bench": "constrained"' in capsys.readouterr().out


@pytest.mark.slow
def test_history_scale_bench_quick(capsys):
    """Three apps over 3, 50 and 100 runs (about 20 s: the apps' pages are built): every measure timed on each."""
    from bench import history_scale

    report = history_scale.main(["--quick"])
    assert report["runs"] == {"empty": 3, "page": 50, "full": 100}
    assert set(report["figures"]) == {
        "page load",
        "runs tab",
        "runs tab over HTTP",
        "compare 3 runs",
        "api runs",
        "api runs page 50",
    }
    for row in report["figures"].values():
        assert all(
            row[side]["ms"] > 0 and len(row[side]["all_ms"]) == report["repeats"] for side in ("empty", "page", "full")
        )
        assert row["full/empty"] > 0 and row["full/page"] > 0
    assert "full/empty" in capsys.readouterr().out


@pytest.mark.slow
def test_chat_threads_bench_quick(capsys, tiny_model_dir):
    """On the tiny model: all cores against the threads chosen for the load, alone and beside a busy process."""
    from bench import chat_threads

    report = chat_threads.main(["--quick", "--model", str(tiny_model_dir)])
    for name in ("alone", "beside_training_load"):
        assert all(v > 0 for values in report[name]["tokens_per_second"].values() for v in values)
        assert 1 <= min(report[name]["chosen_threads"]) <= report["cores"]
    assert "chosen threads" in capsys.readouterr().out


@pytest.mark.slow
def test_scale_bench_quick(capsys, tmp_path):
    """A 1,500-row file sampled (``--sample-mb 0.5``): both sides run, the check answers first from
    the sample and its full pass follows (about a minute, each side's process start)."""
    from bench import scale

    report = scale.main(["--quick", "--rows", "1500", "--sample-mb", "0.5", "--dir", str(tmp_path)])
    (entry,) = report["files"]
    bare, check = entry["runs"]
    assert (bare["side"], check["side"]) == ("bare", "check") and bare["rows"] == 1500
    assert bare["wall_s"] > 0 and bare["peak_rss_mib"] > 0 and check["peak_rss_mib"] > 0
    assert check["sampled"] and check["basis"].startswith("estimated from") and "of 1,500 rows" in check["basis"]
    assert 0 < check["first_answer_s"] < check["wall_s"]
    assert abs(check["tokens_trained"]["error_pct"]) < 5 and check["total_steps"]["error_pct"] == 0
    assert "first answer" in capsys.readouterr().out


def test_recipe_sources_bench_quick(capsys):
    """markitdown on each kind (pymupdf4llm too where it imports): times and quality measured."""
    from bench import recipe_sources

    report = recipe_sources.main(["--quick"])
    found = {(r["converter"], r["file"]) for r in report["results"]}
    assert {("markitdown", "pdf"), ("markitdown", "docx"), ("markitdown", "html")} <= found
    assert all(r["seconds"] > 0 and r["chars"] > 0 and r["paragraphs_found"] > 0.9 for r in report["results"])
    assert '"bench": "recipe_sources"' in capsys.readouterr().out
