"""Chat with the real SmolLM2-135M-Instruct and a real 3-step LoRA run (``trained_run``): the
engine's greedy answers equal a direct ``model.generate`` with the same adapter (and with it
disabled for the base), base and tuned answers differ, the CLI prints the same answer. On the tiny
model's run (``tiny_trained_run``): the choices, Stop generation cancels, a killed inference worker
is reported and replaced, training takes the machine, and every bad input gets a clear refusal."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys

import pytest

from tests.conftest import REPO
from tests.support import fake_workers
from trainer_core.runs.job import JobRunner
from trainer_core.runs.store import RunStore
from trainer_core.schemas import TrainingStartRequest
from trainer_core.serving.engine import ChatEngine, ChatInputError, ChatUnavailable
from trainer_core.serving.errors import TRAINING_BUSY
from trainer_core.serving.schemas import ChatMessage, GenerationSettings
from trainer_core.settings import Settings

pytestmark = pytest.mark.slow
PROMPT = "Who are you?"
GREEDY = GenerationSettings(temperature=0, max_new_tokens=48)


def _user(text: str) -> list[ChatMessage]:
    return [ChatMessage(role="user", content=text)]


@pytest.fixture(scope="module")
def studio(trained_run):
    """(runner with a fake training worker, engine) over the trained run's history."""
    runner = JobRunner(
        worker_target=fake_workers.stepping_worker,
        runs_dir=trained_run.settings.runs_dir,
        store=RunStore(trained_run.db_path),
        warm_modules=(),
    )
    engine = ChatEngine(runner, trained_run.settings)
    runner.before_start = engine.unload
    yield runner, engine
    engine.unload()
    runner.stop(save=False)
    runner.wait(10)
    runner.store.close()


@pytest.fixture(scope="module")
def tiny_studio(tiny_trained_run):
    """``studio`` over the tiny trained run's history."""
    runner = JobRunner(
        worker_target=fake_workers.stepping_worker,
        runs_dir=tiny_trained_run.settings.runs_dir,
        store=RunStore(tiny_trained_run.db_path),
        warm_modules=(),
    )
    engine = ChatEngine(runner, tiny_trained_run.settings)
    runner.before_start = engine.unload
    yield runner, engine
    engine.unload()
    runner.stop(save=False)
    runner.wait(10)
    runner.store.close()


@pytest.fixture(scope="module")
def direct(trained_run, model_dir):
    """Greedy answers to PROMPT computed here with plain transformers + PEFT: (tuned, base)."""
    import torch
    from peft import PeftModel
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from trainer_core.models.loading import compute_dtype

    tokenizer = AutoTokenizer.from_pretrained(trained_run.output_dir)
    # the dtype chat loads models in (bf16 on a CPU whose bf16 pays; its adapter then stays unmerged, as here)
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=compute_dtype("cpu"), attn_implementation="sdpa")
    model = PeftModel.from_pretrained(model, trained_run.output_dir).eval()
    text = tokenizer.apply_chat_template(
        [{"role": "user", "content": PROMPT}], tokenize=False, add_generation_prompt=True
    )
    ids = tokenizer(text, add_special_tokens=False, return_tensors="pt")["input_ids"]

    def answer() -> str:
        with torch.no_grad():
            out = model.generate(
                ids, attention_mask=torch.ones_like(ids), max_new_tokens=GREEDY.max_new_tokens, do_sample=False
            )
        return tokenizer.decode(out[0, ids.shape[1] :], skip_special_tokens=True)

    tuned = answer()
    with model.disable_adapter():
        base = answer()
    return tuned, base


def test_choices_are_base_the_run_and_its_checkpoints_newest_first(tiny_studio, tiny_trained_run, tiny_model_dir):
    runner, engine = tiny_studio
    choices = engine.choices()
    job = tiny_trained_run.job_id
    assert [c.id for c in choices] == ["base", job, f"{job}/checkpoint-3", f"{job}/checkpoint-2", f"{job}/checkpoint-1"]
    assert [c.step for c in choices] == [None, 3, 3, 2, 1]
    losses = {m.step: m.loss for m in runner.store.get_run(job).metrics}
    assert [c.loss for c in choices[2:]] == [losses[3], losses[2], losses[1]]
    assert all(c.adapter and c.base_model == str(tiny_model_dir) for c in choices[1:])
    assert choices[0].base_model == str(tiny_model_dir)


def test_greedy_answers_equal_model_generate_with_and_without_the_adapter(studio, trained_run, direct):
    runner, engine = studio
    tuned, base = direct
    assert tuned != base  # 3 steps at learning_rate 1e-3 changed the answer
    plain_base = engine.complete("base", _user(PROMPT), GREEDY)
    assert plain_base.delta == base
    events = list(engine.stream(trained_run.job_id, _user(PROMPT), GREEDY))
    assert "".join(e.delta for e in events) == tuned and len(events) > 3  # streamed piece by piece
    final = events[-1]
    assert final.finish_reason in ("stop", "length") and final.prompt_tokens > 5 and final.completion_tokens > 1
    adapter_off = engine.complete(trained_run.job_id, _user(PROMPT), GREEDY, use_adapter=False)
    assert adapter_off.delta == base  # the same loaded weights with the adapter disabled
    assert engine.state()["loaded"] == trained_run.job_id


def test_cli_prompt_prints_the_same_greedy_answer(trained_run, direct):
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "trainer_core",
            "chat",
            str(trained_run.output_dir),
            "--prompt",
            PROMPT,
            "--temperature",
            "0",
            "--max-new-tokens",
            str(GREEDY.max_new_tokens),
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.rstrip("\n") == direct[0]


def test_cli_refuses_a_folder_without_weights(tmp_path):
    result = subprocess.run(
        [sys.executable, "-m", "trainer_core", "chat", str(tmp_path), "--prompt", "hi"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 2 and "has no model weights" in result.stderr and result.stdout == ""


def test_stop_generation_cancels_a_long_answer(tiny_studio, tiny_trained_run):
    runner, engine = tiny_studio
    stream = engine.stream(
        tiny_trained_run.job_id,
        _user("Write a very long story about a dragon."),
        GenerationSettings(temperature=0, max_new_tokens=2000),
    )
    first = [next(stream) for _ in range(3)]
    assert all(e.finish_reason is None for e in first)
    assert engine.stop_generation()
    rest = list(stream)
    assert rest[-1].finish_reason == "cancelled" and rest[-1].completion_tokens < 100


def test_a_too_long_prompt_is_refused_and_the_model_stays_loaded(tiny_studio, tiny_trained_run):
    runner, engine = tiny_studio
    engine.load(tiny_trained_run.job_id)
    worker = engine._worker
    with pytest.raises(ChatInputError, match=r"context of 8192 tokens leaves room for 8144"):
        engine.complete(tiny_trained_run.job_id, _user("hello " * 9000), GREEDY)
    assert engine._worker is worker and worker.is_alive()


def test_a_killed_inference_worker_is_reported_and_the_next_call_works(tiny_studio, tiny_trained_run):
    runner, engine = tiny_studio
    before = engine.complete(tiny_trained_run.job_id, _user(PROMPT), GREEDY).delta
    stream = engine.stream(
        tiny_trained_run.job_id,
        _user("Write a very long story about a dragon."),
        GenerationSettings(temperature=0, max_new_tokens=2000),
    )
    next(stream)
    os.kill(engine._worker.pid, signal.SIGKILL)
    with pytest.raises(ChatUnavailable, match=r"The chat model's process was killed \(signal 9\)"):
        list(stream)
    assert engine.state()["loaded"] is None
    assert engine.complete(tiny_trained_run.job_id, _user(PROMPT), GREEDY).delta == before


def test_starting_training_unloads_the_chat_model_and_chat_is_refused(tiny_studio, tiny_trained_run, tmp_path):
    runner, engine = tiny_studio
    stream = engine.stream(
        tiny_trained_run.job_id,
        _user("Write a very long story about a dragon."),
        GenerationSettings(temperature=0, max_new_tokens=2000),
    )
    next(stream)
    response = runner.start(TrainingStartRequest(local_datasets=["unused.json"], output_dir=str(tmp_path / "fake")))
    try:
        assert response.status == "queued" and engine.state()["loaded"] is None
        with pytest.raises(ChatUnavailable, match=TRAINING_BUSY.split(";")[0]):
            list(stream)
        with pytest.raises(ChatUnavailable, match="chat again when it ends"):
            engine.stream(tiny_trained_run.job_id, _user(PROMPT), GREEDY)
    finally:
        runner.stop(save=False)
        runner.wait(10)
        runner.store.delete_run(response.job_id)  # the shared history lists only the trained run


def test_bad_targets_are_refused_with_the_reason(tiny_trained_run, tmp_path):
    """A run cancelled before any save, a deleted folder, a checkpoint whose adapter is on another base."""
    settings = Settings(data_dir=tmp_path / "data")
    store = RunStore(settings.db_path)
    request = {"model_name": json.loads((tiny_trained_run.output_dir / "request.json").read_text())["model_name"]}
    for job_id in ("cancelled", "deleted", "foreign"):
        folder = settings.runs_dir / job_id
        if job_id == "foreign":
            shutil.copytree(tiny_trained_run.output_dir / "checkpoint-1", folder / "checkpoint-1")
            config = folder / "checkpoint-1" / "adapter_config.json"
            config.write_text(
                json.dumps({**json.loads(config.read_text()), "base_model_name_or_path": "org/other-model"})
            )
        folder.mkdir(parents=True, exist_ok=True)
        store.create_run(job_id, request, str(folder), "loading_model")
        store.finish_run(job_id, "stopped", None, None)
    shutil.rmtree(settings.runs_dir / "deleted")
    engine = ChatEngine(JobRunner(store=store, runs_dir=settings.runs_dir), settings)
    cases = {
        "cancelled": "has no weights to talk to: it ended before its first save",
        "deleted": r"no longer exists \(deleted\)",
        "foreign/checkpoint-1": "its adapter was trained on org/other-model, not on the run's base model",
    }
    for model_id, message in cases.items():
        with pytest.raises(ChatInputError, match=message):
            engine.load(model_id)
    assert [c.id for c in engine.choices()] == ["base"]
    store.close()
