"""Real fine-tunes of SmolLM2-135M-Instruct through the page's own API (gradio_client)."""

from __future__ import annotations

import json
import math
import os
import signal
import time
from pathlib import Path

import pytest

from tests.e2e.conftest import form_args, is_training, statuses, wait_for
from trainer_core.vocabulary import Phase
from ui.form import FORM_FIELDS

pytestmark = pytest.mark.slow
SMALL = dict(batch_size=2, max_seq_length=128, dataset_slice_end=32, lr_scheduler_type="linear")
STEPS = 100  # a tiny-model run of about 7 s: long enough to stop mid-way


def _generate(output_dir: Path, model_dir: Path) -> str:
    """Reload the saved adapter on the base model with PEFT and greedily generate a few tokens."""
    import torch
    from peft import PeftModel
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(output_dir)
    model = PeftModel.from_pretrained(AutoModelForCausalLM.from_pretrained(model_dir), output_dir)
    prompt = tokenizer.apply_chat_template(
        [{"role": "user", "content": "Name a fruit."}], tokenize=False, add_generation_prompt=True
    )
    inputs = tokenizer(prompt, return_tensors="pt", add_special_tokens=False)
    with torch.no_grad():
        out = model.generate(**inputs, max_new_tokens=8, do_sample=False)
    return tokenizer.decode(out[0, inputs["input_ids"].shape[1] :], skip_special_tokens=True)


def test_train_alpaca_streams_every_step_and_saves_a_working_adapter(client, app_server, datasets_dir, model_dir):
    runner, _ = app_server
    job = client.submit(*form_args(str(datasets_dir / "alpaca_en_demo.json"), max_steps=4, **SMALL), api_name="/start")
    updates = list(statuses(job))
    steps = [u["details"]["step"] for u in updates if u["details"].get("step") is not None]
    losses = [u["details"]["loss"] for u in updates if u["details"].get("loss") is not None]
    assert len(set(steps)) >= 4 and steps == sorted(steps) and steps[-1] == 4
    assert all(math.isfinite(x) for x in losses) and len(losses) >= 4
    final = updates[-1]
    assert final["phase"] == Phase.completed.value and final["error"] is None
    assert final["details"]["format"] == "alpaca" and final["details"]["total_steps"] == 4
    output_dir = Path(final["details"]["output_dir"])
    assert (output_dir / "adapter_model.safetensors").is_file() and (output_dir / "tokenizer.json").is_file()
    logged = [json.loads(line) for line in (output_dir / "metrics.jsonl").read_text().splitlines()]
    assert [m["step"] for m in logged] == [1, 2, 3, 4] and all(m["loss"] > 0 for m in logged)
    assert isinstance(_generate(output_dir, model_dir), str)


def test_page_opened_mid_run_gets_full_history_and_stop_saves_a_loadable_adapter(
    client, app_server, datasets_dir, tiny_model_dir
):
    from gradio_client import Client

    runner, url = app_server
    client.submit(
        *form_args(str(datasets_dir / "alpaca_en_demo.json"), max_steps=200, model_name=str(tiny_model_dir), **SMALL),
        api_name="/start",
    )
    wait_for(lambda: is_training(runner, min_step=2), what="step 2")
    late_tab = Client(url, verbose=False).submit(api_name="/watch")
    first = next(iter(late_tab))
    loss_chart = json.loads(first[2]["plot"])
    assert loss_chart["data"][0]["x"][:2] == [1, 2]  # the history from step 1, not just new steps
    client.predict(api_name="/stop")
    assert runner.wait(120)
    status = runner.status()
    assert status.phase == Phase.stopped and status.error is None
    saved_step = status.details["step"]
    assert 2 <= saved_step < 200
    output_dir = Path(status.details["output_dir"])
    assert (output_dir / "adapter_model.safetensors").is_file()
    assert (output_dir / f"checkpoint-{saved_step}" / "trainer_state.json").is_file()
    assert isinstance(_generate(output_dir, tiny_model_dir), str)


def test_cancel_during_model_loading_ends_the_worker_within_two_seconds(client, app_server, datasets_dir):
    runner, _ = app_server
    client.submit(*form_args(str(datasets_dir / "identity.json"), max_steps=4, **SMALL), api_name="/start")
    wait_for(lambda: runner._process is not None and runner._process.is_alive(), what="worker start")
    assert runner.status().phase == Phase.loading_model  # a forked worker is loading the model at once
    process = runner._process
    began = time.monotonic()
    client.predict(api_name="/cancel")
    wait_for(lambda: not process.is_alive(), timeout_s=5, what="worker exit")
    assert time.monotonic() - began <= 2.0
    assert runner.wait(5) and runner.status().phase == Phase.stopped


def test_killed_worker_gives_error_and_the_next_start_works(client, app_server, datasets_dir, tiny_model_dir):
    runner, _ = app_server
    args = form_args(str(datasets_dir / "identity.json"), max_steps=500, model_name=str(tiny_model_dir), **SMALL)
    client.submit(*args, api_name="/start")
    wait_for(lambda: is_training(runner), what="first training step")
    os.kill(runner._process.pid, signal.SIGKILL)
    assert runner.wait(30)
    status = runner.status()
    assert status.phase == Phase.error and "signal 9" in status.error
    job = client.submit(*args, api_name="/start")
    wait_for(lambda: runner.status().is_training_running, timeout_s=10, what="second start")
    client.predict(api_name="/cancel")
    assert runner.wait(10) and runner.status().phase == Phase.stopped
    job.cancel()


def refusal(client, *args) -> str:
    """The notice a refused ``/start`` shows beside the button (its first update's last output)."""
    job = client.submit(*args, api_name="/start")
    wait_for(lambda: job.outputs() or job.done(), timeout_s=60, what="the refusal")
    return job.outputs()[0][-1]  # refused while a job runs, it goes on following that job until it ends


def test_second_start_while_running_is_refused(client, app_server, datasets_dir, tiny_model_dir):
    runner, _ = app_server
    args = form_args(str(datasets_dir / "identity.json"), max_steps=500, model_name=str(tiny_model_dir), **SMALL)
    client.submit(*args, api_name="/start")
    wait_for(lambda: runner.status().is_training_running, timeout_s=10, what="start")
    job_id = runner.status().job_id
    assert "already in progress" in refusal(client, *args)
    assert runner.status().job_id == job_id
    client.predict(api_name="/cancel")
    assert runner.wait(10)


def test_invalid_settings_show_an_error_naming_the_field(client, app_server, datasets_dir, studio_settings):
    notice = refusal(client, *form_args(str(datasets_dir / "identity.json"), learning_rate=1.5))
    assert "Learning rate (Hyperparameters)" in notice and 'data-fields="field-learning_rate"' in notice
    assert "learning_rate" not in notice.split(">", 1)[1]  # the text says the label, not the field name
    assert "file not found" in refusal(client, *form_args(str(datasets_dir / "missing.json")))
    assert "outside the allowed folders" in refusal(client, *form_args(str(datasets_dir / ".." / "STYLE.md")))
    bad = Path(studio_settings.data_dir) / "bad.json"
    bad.write_text('[{"conversations": [{"from": "human", "value": "hi"}, {"from": "robot", "value": "x"}]}]')
    began = time.monotonic()
    assert "bad.json, row 1: turn 2 has unknown role &#x27;robot&#x27;" in refusal(client, *form_args(str(bad)))
    assert time.monotonic() - began < 10  # at Start, not after a model load
    assert not app_server[0].status().is_training_running


def test_runs_tab_lists_shows_loads_resumes_and_deletes(client, app_server, datasets_dir, tiny_model_dir):
    runner, _ = app_server
    client.submit(
        *form_args(str(datasets_dir / "identity.json"), max_steps=STEPS, model_name=str(tiny_model_dir), **SMALL),
        api_name="/start",
    )
    wait_for(lambda: is_training(runner, min_step=1), what="first step")
    client.predict(api_name="/stop")
    assert runner.wait(120) and runner.status().phase == Phase.stopped
    job_id = runner.status().job_id
    stopped_at = runner.status().details["step"]
    table = client.predict(api_name="/runs")
    assert table["data"][0][0] == job_id and table["data"][0][3] == "stopped"  # newest first; saved, not cancelled
    summary, settings, *_ = client.predict(job_id, api_name="/show_run")
    assert "stopped" in summary and "checkpoint-" in summary and settings["max_steps"] == STEPS
    loaded = client.predict(job_id, api_name="/load_settings")
    assert loaded[0] == os.path.realpath(datasets_dir / "identity.json")
    assert dict(zip(FORM_FIELDS, loaded[2:]))["max_steps"] == STEPS
    trained_before = runner.store.get_run(job_id).training_seconds
    assert trained_before > 0
    updates = list(statuses(client.submit(job_id, api_name="/resume")))
    final = updates[-1]
    assert final["phase"] == "completed" and final["job_id"] == job_id and final["details"]["step"] == STEPS
    run = runner.store.get_run(job_id)
    assert [m.step for m in run.metrics] == list(range(1, STEPS + 1)) and stopped_at < STEPS
    assert run.training_seconds > trained_before and run.end_reason == "completed"  # training time continued
    output_dir = Path(run.output_dir)
    assert output_dir.is_dir()
    client.predict(job_id, api_name="/delete_run")
    assert not output_dir.exists() and runner.store.get_run(job_id) is None
    with pytest.raises(Exception, match="No run"):
        client.predict(job_id, api_name="/show_run")
