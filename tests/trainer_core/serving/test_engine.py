"""The chat engine with a fake inference worker (``tests.support.fake_chat_workers``): one model loaded at a
time, generations in turn and in order, Stop generation, recovery from a killed worker, and
training's priority (chat refused while a job runs; Start unloads the model)."""

import json
import os
import threading
import time

import pytest

from tests.support import fake_chat_workers, fake_workers
from trainer_core.runs.job import JobRunner
from trainer_core.runs.store import RunStore
from trainer_core.schemas import TrainingStartRequest
from trainer_core.serving.engine import ChatEngine, ChatInputError, ChatUnavailable, UnknownModel
from trainer_core.serving.errors import TRAINING_BUSY
from trainer_core.serving.schemas import ChatMessage, GenerationSettings
from trainer_core.settings import Settings

SETTINGS = GenerationSettings(temperature=0, max_new_tokens=1000)


def _user(text):
    return [ChatMessage(role="user", content=text)]


@pytest.fixture
def studio(tmp_path):
    settings = Settings(data_dir=tmp_path / "data")
    store = RunStore(settings.db_path)
    folder = settings.runs_dir / "run1"
    folder.mkdir(parents=True)
    (folder / "adapter_model.safetensors").write_bytes(b"w")
    (folder / "adapter_config.json").write_text(json.dumps({"base_model_name_or_path": "org/base"}))
    store.create_run("run1", {"model_name": "org/base"}, str(folder), "completed")
    runner = JobRunner(worker_target=fake_workers.stepping_worker, runs_dir=settings.runs_dir, store=store)
    yield settings, runner
    runner.stop(save=False)
    runner.wait(10)


@pytest.fixture
def engine(studio):
    settings, runner = studio
    engine = ChatEngine(runner, settings, worker_target=fake_chat_workers.echo_worker)
    yield engine
    engine.unload()


def test_load_once_then_switch_models(engine):
    assert engine.state() == {"loaded": None, "loading": None, "load_seconds": None}
    assert engine.load("base") > 0
    first = engine._worker
    assert engine.load("base") == 0.0 and engine._worker is first
    assert engine.state()["loaded"] == "base" and engine.state()["load_seconds"] > 0
    assert engine.load("run1") > 0
    assert engine.state()["loaded"] == "run1" and not first.is_alive()  # one model at a time
    engine.unload()
    assert engine.state() == {"loaded": None, "loading": None, "load_seconds": None}
    engine.unload()  # nothing loaded: nothing to do


def test_stream_loads_on_demand_and_complete_joins_the_answer(engine):
    events = list(engine.stream("run1", _user("hello there"), SETTINGS))
    assert "".join(e.delta for e in events) == "[run1] hello there "
    assert [e.finish_reason for e in events] == [None, None, None, "stop"]
    assert (events[-1].prompt_tokens, events[-1].completion_tokens) == (2, 3)
    answer = engine.complete("run1", _user("a b"), GenerationSettings(max_new_tokens=2))
    assert (answer.delta, answer.finish_reason, answer.completion_tokens) == ("[run1] a ", "length", 2)


def test_generations_take_turns_in_arrival_order(engine):
    engine.load("base")
    order = []

    def chat(name):
        for event in engine.stream("base", _user(" ".join([name] * 8)), SETTINGS):
            if event.delta.strip() == name:
                order.append(name)

    threads = [threading.Thread(target=chat, args=(name,)) for name in "ABC"]
    for thread in threads:
        thread.start()
        time.sleep(0.05)  # A is answering; B arrives before C
    for thread in threads:
        thread.join(30)
    assert "".join(order) == "A" * 8 + "B" * 8 + "C" * 8


def test_stop_generation_ends_the_answer_as_cancelled(engine):
    assert engine.stop_generation() is False  # nothing runs
    stream = engine.stream("base", _user("word " * 500), SETTINGS)
    pieces = [next(stream), next(stream), next(stream)]
    assert engine.stop_generation() is True
    rest = list(stream)
    assert rest[-1].finish_reason == "cancelled" and len(pieces) + len(rest) < 100
    assert engine.complete("base", _user("again"), SETTINGS).delta == "[base] again "  # the flag was cleared


def test_a_closed_stream_stops_its_generation_and_the_next_one_starts_clean(engine):
    stream = engine.stream("base", _user("old " * 500), SETTINGS)
    next(stream)
    next(stream)
    stream.close()
    assert engine.complete("base", _user("new"), SETTINGS).delta == "[base] new "


def test_a_killed_worker_is_reported_and_the_next_call_loads_again(engine):
    engine.load("base")
    with pytest.raises(ChatUnavailable, match=r"The chat model's process was killed \(signal 9\) by something outside"):
        engine.complete("base", _user("die"), SETTINGS)
    assert engine.state()["loaded"] is None
    assert engine.complete("base", _user("alive"), SETTINGS).delta == "[base] alive "


def test_a_worker_killed_while_idle_is_replaced_silently(engine):
    engine.load("base")
    os.kill(engine._worker.pid, 9)
    engine._worker.join(5)
    assert engine.complete("base", _user("fresh"), SETTINGS).delta == "[base] fresh "


def test_worker_errors_keep_the_model_loaded(engine):
    engine.load("base")
    worker = engine._worker
    with pytest.raises(ChatInputError, match="fake input error"):
        engine.complete("base", _user("too long"), SETTINGS)
    with pytest.raises(ChatUnavailable, match="fake internal error"):
        engine.complete("base", _user("boom"), SETTINGS)
    assert engine._worker is worker and worker.is_alive()
    assert engine.complete("base", _user("ok"), SETTINGS).finish_reason == "stop"


@pytest.mark.parametrize(
    "messages, message",
    [
        ([], "at least one message"),
        (
            [ChatMessage(role="user", content="a"), ChatMessage(role="assistant", content="b")],
            "last message must be the user's",
        ),
        (
            [
                ChatMessage(role="user", content="a"),
                ChatMessage(role="system", content="b"),
                ChatMessage(role="user", content="c"),
            ],
            "system message may only come first",
        ),
        (
            [ChatMessage(role="user", content="a"), {"role": "robot", "content": "a"}],
            r"messages\[1\].role: Input should be",
        ),
    ],
)
def test_bad_messages_are_refused_before_anything_loads(engine, messages, message):
    with pytest.raises(ChatInputError, match=message):
        engine.stream("base", messages, SETTINGS)
    assert engine.state()["loaded"] is None


def test_unknown_models_and_runs_without_weights_are_refused(engine, studio):
    settings, runner = studio
    with pytest.raises(UnknownModel):
        engine.stream("nope", _user("hi"), SETTINGS)
    with pytest.raises(UnknownModel):
        engine.load("run1/checkpoint-x")
    (settings.runs_dir / "run1" / "adapter_model.safetensors").unlink()
    with pytest.raises(ChatInputError, match="run run1 .* has no weights"):
        engine.load("run1")


def test_a_model_that_fails_to_load_is_an_input_error_and_a_killed_load_is_unavailable(studio):
    settings, runner = studio
    failing = ChatEngine(runner, settings, worker_target=fake_chat_workers.failing_worker)
    with pytest.raises(ChatInputError, match="base: could not load model from /nowhere"):
        failing.load("base")
    assert failing.state() == {"loaded": None, "loading": None, "load_seconds": None}
    dying = ChatEngine(runner, settings, worker_target=fake_chat_workers.dying_loader)
    with pytest.raises(ChatUnavailable, match="killed"):
        dying.load("base")


def test_chat_is_refused_while_training_and_start_unloads_the_model(engine, studio, tmp_path):
    settings, runner = studio
    runner.before_start = engine.unload
    stream = engine.stream("base", _user("long " * 500), SETTINGS)
    next(stream)
    worker = engine._worker
    request = TrainingStartRequest(local_datasets=["unused.json"], output_dir=str(tmp_path / "out"))
    assert runner.start(request).status == "queued"
    assert engine.state()["loaded"] is None and not worker.is_alive()  # unloaded before Start returned
    with pytest.raises(ChatUnavailable, match=TRAINING_BUSY.split(";")[0]):
        list(stream)
    for call in (lambda: engine.stream("base", _user("hi"), SETTINGS), lambda: engine.load("base")):
        with pytest.raises(ChatUnavailable, match="A training job is running and has the machine"):
            call()
    with pytest.raises(ChatUnavailable, match="embed again when it ends"):
        engine.embed("base", ["what is a cat?"])
    runner.stop(save=False)
    assert runner.wait(10)
    assert engine.complete("base", _user("after"), SETTINGS).delta == "[base] after "


def test_embeddings_come_from_embedding_models_only_and_refusals_name_the_field(engine, studio):
    settings, runner = studio
    folder = settings.runs_dir / "emb1"
    folder.mkdir()
    (folder / "modules.json").write_text("[]")
    (folder / "adapter_model.safetensors").write_bytes(b"w")
    (folder / "adapter_config.json").write_text(json.dumps({"base_model_name_or_path": "org/base"}))
    runner.store.create_run("emb1", {"model_name": "org/base"}, str(folder), "completed")
    got = engine.embed("emb1", ["one two three", "four"])
    assert got.prompt_tokens == 4 and got.vectors.shape == (2, 2)
    assert abs(got.vectors[0][0] - 13 / (13**2 + 3**2) ** 0.5) < 1e-6
    with pytest.raises(ChatInputError, match="dimensions: at most 2") as too_big:
        engine.embed("emb1", ["a"], dimensions=3)
    assert (too_big.value.fields, too_big.value.code) == (("dimensions",), "dimensions_too_large")
    assert engine.embed("emb1", ["a"]).prompt_tokens == 1  # the worker still serves
    with pytest.raises(ChatInputError, match="an embedding model") as chat:
        engine.complete("emb1", _user("hi"), SETTINGS)
    assert chat.value.code == "embedding_model"
    with pytest.raises(ChatInputError, match="a chat model, not an embedding model") as wrong:
        engine.embed("run1", ["a"])
    assert (wrong.value.code, wrong.value.fields) == ("not_an_embedding_model", ("model",))
    with pytest.raises(ChatInputError, match="give a text") as empty:  # checked before the worker (test_inputs.py)
        engine.embed("emb1", [])
    assert empty.value.fields == ("input",)


def test_a_whole_speech_to_text_model_has_no_adapter_to_switch_off(engine, studio):
    settings, runner = studio
    folder = settings.runs_dir / "whole"  # a full fine-tune of Whisper: its own config and weights
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({"model_type": "whisper"}))
    (folder / "model.safetensors").write_bytes(b"w")
    runner.store.create_run("whole", {"model_name": str(folder)}, str(folder), "completed")
    with pytest.raises(ChatInputError, match="no adapter to switch off") as refused:
        engine.transcribe("whole", "data:audio/wav;base64,AAAA", use_adapter=False)
    assert refused.value.code == "no_adapter_to_switch_off" and engine.state()["loaded"] is None  # nothing loaded
