"""The Chat tab's model list (``chat_handlers.model_listing``) with the fake engine: the newest run
chosen at first, a choice the user made kept, and a run finished since the last listing preselected."""

from __future__ import annotations

from tests.support.fake_engine import FakeEngine
from ui.chat_handlers import model_listing, newest_run

OLD, NEW = "job_20250101_090000_00000000", "job_20250102_090000_11111111"


def test_the_run_just_trained_is_preselected():
    engine = FakeEngine()
    assert model_listing(engine)[0]["value"] == "base"  # no run yet
    engine.add(OLD)
    first, seen = model_listing(engine)
    assert first["value"] == OLD and seen == OLD  # the newest run, not the base model
    kept, seen = model_listing(engine, "base", seen)
    assert "value" not in kept and seen == OLD  # the user chose the base model: it stays
    engine.models = {"base": engine.models["base"], NEW: engine.add(NEW), OLD: engine.models[OLD]}  # newest first
    finished, seen = model_listing(engine, "base", seen)
    assert finished["value"] == NEW and seen == NEW  # a run finished since: preselected
    assert "value" not in model_listing(engine, "base", seen)[0]  # once: then the user's choice again
    # "Chat with this run" on an older run sets the choice and the newest seen (run_handlers.chat_with): kept
    assert "value" not in model_listing(engine, OLD, newest_run(engine.choices()))[0]


def test_each_answer_says_its_tokens_per_second():
    from trainer_core.serving.schemas import GenerationSettings
    from ui.chat_handlers import send

    engine = FakeEngine()
    engine.add(OLD)
    defaults = [f.default for f in GenerationSettings.model_fields.values()]
    *_, last = send(engine, OLD, True, "", "one two three", [], [], *defaults)
    state = last[3]
    assert "is loaded" in state and "Tuned: 4 tokens in" in state and "; base: 4 tokens in" in state
    assert state.endswith(" tokens/s.")
