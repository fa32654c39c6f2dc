"""The preference runs' metrics from TRL's logs to the monitor: the log-name mapping, the rewards
chart (shown only for runs that log rewards), the series in the status, and the method section's
visibility and learning-rate rules."""

from __future__ import annotations

import math

from trainer_core.runs.metrics import MetricsHistory, series_of
from trainer_core.status import TrainingProgress
from trainer_core.training.preference import preference_values
from ui import charts
from ui import train_handlers as handlers
from ui.method_panel import method_beta, method_rate, method_visibility


def test_trl_log_names_become_progress_fields():
    logs = {
        "loss": 0.69,
        "rewards/chosen": 0.1,
        "rewards/rejected": -0.2,
        "rewards/margins": 0.3,
        "rewards/accuracies": 0.5,
        "kl": 0.01,
        "eval_rewards/margins": 0.4,
        "eval_rewards/accuracies": 0.75,
        "eval_rewards/chosen": 1.0,
        "logps/chosen": -50.0,
        "rewards/rejected_nan": math.nan,
    }
    assert preference_values(logs) == {
        "rewards_chosen": 0.1,
        "rewards_rejected": -0.2,
        "rewards_margins": 0.3,
        "rewards_accuracies": 0.5,
        "kl": 0.01,
        "eval_rewards_margins": 0.4,
        "eval_rewards_accuracies": 0.75,
    }
    assert preference_values({"rewards/margins": math.inf}) == {}


def _history(preference: bool) -> MetricsHistory:
    history = MetricsHistory()
    for step in (1, 2, 3):
        extra = (
            dict(
                rewards_chosen=0.1 * step,
                rewards_rejected=-0.1 * step,
                rewards_margins=0.2 * step,
                rewards_accuracies=0.5,
            )
            if preference
            else {}
        )
        history.append(TrainingProgress(job_id="j", step=step, total_steps=3, loss=0.7, learning_rate=5e-5, **extra))
    return history


def test_rewards_chart_is_shown_for_preference_runs_only():
    points = _history(True).chart_points()
    figure = charts.preference_figure(points)
    assert [t.name for t in figure.data] == ["chosen", "rejected", "margins", "accuracies"]
    assert figure.data[-1].yaxis == "y2" and list(figure.layout.yaxis2.range) == [0, 1.05]
    status_update = handlers.render(handlers.TrainingStatus(), points)
    assert status_update[5]["visible"] is True
    sft = handlers.render(handlers.TrainingStatus(), _history(False).chart_points())
    assert sft[5]["visible"] is False and not charts.has_preference_points(_history(False).chart_points())
    assert len(sft) == handlers.MONITOR_VIEWS + 3  # then Start, Stop, Cancel


def test_status_series_carry_the_rewards_of_preference_runs_only():
    preference = series_of(_history(True).events())
    assert preference.rewards_margins == [0.2, 0.4, 0.2 * 3] and preference.kl == [None, None, None]
    assert series_of(_history(False).events()).rewards_margins == []


def test_method_section_shows_each_methods_settings_and_moves_a_default_rate():
    grpo_fields = (
        "num_generations",
        "max_completion_length",
        "temperature",
        "grpo_loss_type",
        "rewards",
        "reward_file",
    )
    assert method_visibility("sft") == {
        "beta": False,
        "loss_type": False,
        "desirable_weight": False,
        "undesirable_weight": False,
        **{name: False for name in grpo_fields},
    }
    assert method_visibility("dpo") == {
        "beta": True,
        "loss_type": True,
        "desirable_weight": False,
        "undesirable_weight": False,
        **{name: False for name in grpo_fields},
    }
    assert method_visibility("kto")["desirable_weight"] and not method_visibility("kto")["loss_type"]
    grpo = method_visibility("grpo")
    assert all(grpo[name] for name in grpo_fields) and grpo["beta"] and not grpo["loss_type"]
    assert method_rate("dpo", 1e-3)["value"] == 5e-5 and method_rate("sft", 5e-5)["value"] == 1e-3
    assert method_rate("grpo", 1e-3)["value"] == 2e-4 and method_rate("dpo", 2e-4)["value"] == 5e-5
    assert "value" not in method_rate("dpo", 3e-4)  # a rate the user set stays
    assert method_beta("grpo", 0.1)["value"] == 0.04 and method_beta("dpo", 0.04)["value"] == 0.1
    assert "value" not in method_beta("grpo", 0.2) and "value" not in method_beta("sft", 0.1)


def test_start_from_adapter_lists_completed_lora_runs_only(tmp_path):
    from trainer_core.runs.records import RunRecord
    from trainer_core.vocabulary import Phase
    from ui.method_panel import NEW_ADAPTER, adapter_choices

    def run(job_id, phase, adapter=True, **request):
        folder = tmp_path / job_id
        folder.mkdir()
        if adapter:
            (folder / "adapter_config.json").write_text("{}")
        return RunRecord(
            job_id=job_id,
            created_at=0,
            phase=phase,
            output_dir=str(folder),
            request={"training_type": "lora", "local_datasets": ["/d/identity.json"], **request},
        )

    runs = [
        run("job_a", Phase.completed, name=None),
        run("job_b", Phase.error),
        run("job_c", Phase.completed, adapter=False),
        run("job_d", Phase.completed, training_method="dpo"),
    ]
    assert adapter_choices(runs) == [
        NEW_ADAPTER,
        ("job_a · sft · lora · identity.json", str(tmp_path / "job_a")),
        ("job_d · dpo · lora · identity.json", str(tmp_path / "job_d")),
    ]


def test_the_adapters_at_page_load_are_read_again_only_when_the_history_changed(tmp_path, monkeypatch):
    from trainer_core.runs.store import RunStore
    from ui.method_panel import NEW_ADAPTER, refresh_adapters

    store = RunStore(tmp_path / "studio.db")
    reads = []
    listed = store.list_runs
    monkeypatch.setattr(store, "list_runs", lambda **kw: reads.append(kw) or listed(**kw))

    def finished(job_id):
        folder = tmp_path / job_id
        folder.mkdir()
        (folder / "adapter_config.json").write_text("{}")
        store.create_run(job_id, {"training_type": "lora", "hf_dataset": "org/chat"}, str(folder), "training")
        store.finish_run(job_id, "completed", None, None, "completed")

    finished("job_a")
    first = refresh_adapters(store)["choices"]
    assert first == [NEW_ADAPTER, ("job_a · sft · lora · org/chat", str(tmp_path / "job_a"))]
    assert refresh_adapters(store)["choices"] == first and len(reads) == 1  # unchanged: no run read
    finished("job_b")
    assert [value for _, value in refresh_adapters(store)["choices"]][1] == str(tmp_path / "job_b")
    assert len(reads) == 2
