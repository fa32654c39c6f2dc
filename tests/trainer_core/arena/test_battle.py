"""The arena's engine-side rules with a fake chat engine: names hidden until the vote, sides
shuffled, one vote per battle, refusals (training, one model, the same model twice, unknown ids),
and the leaderboard's win rates, Wilson intervals and Elo (checked by hand)."""

from __future__ import annotations

import random

import pytest

from tests.support.fake_engine import FakeEngine
from trainer_core.arena.battle import Arena, ArenaError, UnknownBattle
from trainer_core.arena.leaderboard import leaderboard, wilson
from trainer_core.arena.schemas import BattleRequest
from trainer_core.arena.store import ArenaStore
from trainer_core.serving.errors import ChatUnavailable, UnknownModel


@pytest.fixture
def arena(tmp_path):
    engine = FakeEngine()
    engine.add("job_a", "run A")
    engine.add("job_b", "run B")
    return Arena(engine, ArenaStore(tmp_path / "history.db"), random.Random(3))


def test_names_stay_hidden_until_the_vote_and_sides_are_shuffled(arena):
    sides = set()
    for _ in range(8):
        found = arena.battle(BattleRequest(prompt="Say hi", models=["job_a", "job_b"]))
        assert found.left.model is None and found.right.model is None and found.vote is None
        assert found.left.text == found.right.text == "echo: Say hi"  # the fake engine echoes
        assert arena.get(found.battle_id).left.model is None
        shown = arena.vote(found.battle_id, "left")
        sides.add(shown.left.model)
        assert {shown.left.model, shown.right.model} == {"job_a", "job_b"}
        assert {shown.left.label, shown.right.label} == {"run A", "run B"} and shown.vote == "left"
    assert sides == {"job_a", "job_b"}  # each model was on the left at least once
    assert [m for m, *_ in arena.engine.calls][:2] in (["job_a", "job_b"], ["job_b", "job_a"])


def test_a_vote_counts_once_and_unknown_battles_are_named(arena):
    found = arena.battle(BattleRequest(prompt="x", models=["job_a", "base"]))
    arena.vote(found.battle_id, "tie")
    with pytest.raises(ArenaError, match="has its vote already \\(tie\\)"):
        arena.vote(found.battle_id, "left")
    with pytest.raises(UnknownBattle, match="does not exist"):
        arena.vote("battle_nope", "left")
    assert arena.leaderboard().battles == 1


def test_a_vote_that_loses_a_race_names_the_vote_that_won(arena, monkeypatch):
    found = arena.battle(BattleRequest(prompt="x", models=["job_a", "job_b"]))
    real = arena.store.vote

    def raced(battle_id, vote, at):  # another request's vote lands between the read and this write
        real(battle_id, "right", at)
        return real(battle_id, vote, at)

    monkeypatch.setattr(arena.store, "vote", raced)
    with pytest.raises(ArenaError, match="has its vote already \\(right\\)"):
        arena.vote(found.battle_id, "left")


def test_the_tab_names_a_refused_setting_by_its_label(arena):
    from ui.arena_tab import battle

    said = list(battle(arena, "job_a", "job_b", "x" * 9000, 256))[-1][2]
    assert "Prompt:" in said and "8000 characters" in said and "Max new tokens" not in said
    said = list(battle(arena, "job_a", "job_b", "hi", 99_999))[-1][2]
    assert "Max new tokens:" in said and "4096" in said
    assert arena.engine.calls == []  # nothing was loaded for either


def test_refusals(arena, tmp_path):
    arena.engine.busy = True
    with pytest.raises(ChatUnavailable, match="training job"):
        arena.battle(BattleRequest(prompt="x"))
    assert arena.engine.calls == []  # nothing loaded
    arena.engine.busy = False
    with pytest.raises(ArenaError, match="two different models"):
        arena.battle(BattleRequest(prompt="x", models=["job_a", "job_a"]))
    with pytest.raises(UnknownModel):
        arena.battle(BattleRequest(prompt="x", models=["job_a", "../etc"]))
    alone = Arena(FakeEngine(), ArenaStore(tmp_path / "alone.db"))
    with pytest.raises(ArenaError, match="needs two models"):
        alone.battle(BattleRequest(prompt="x"))
    random_pair = arena.battle(BattleRequest(prompt="x"))  # two of base, job_a, job_b
    shown = arena.vote(random_pair.battle_id, "both_bad")
    assert shown.left.model != shown.right.model


def test_one_named_model_battles_another_at_random(arena, tmp_path):
    met = set()
    for _ in range(12):
        found = arena.battle(BattleRequest(prompt="x", models=["job_a"]))
        shown = arena.vote(found.battle_id, "tie")
        pair = {shown.left.model, shown.right.model}
        assert "job_a" in pair and len(pair) == 2
        met |= pair - {"job_a"}
    assert met == {"base", "job_b"}  # every other model can be drawn, never job_a against itself
    with pytest.raises(UnknownModel):
        arena.battle(BattleRequest(prompt="x", models=["job_nope"]))
    alone = FakeEngine()
    with pytest.raises(ArenaError, match="needs two models"):  # only base: nothing to draw against it
        Arena(alone, ArenaStore(tmp_path / "alone.db")).battle(BattleRequest(prompt="x", models=["base"]))


def test_wilson_interval_matches_the_formula():
    low, high = wilson(8, 10)  # 0.8 of 10: the textbook 95 % Wilson interval 0.490 .. 0.943
    assert (round(low, 3), round(high, 3)) == (0.490, 0.943)
    assert wilson(0, 0) == (0.0, 1.0) and wilson(5, 5)[1] == 1.0


def test_elo_and_win_rates_by_hand():
    votes = [("a", "b", "left"), ("a", "b", "left"), ("b", "a", "tie"), ("a", "c", "both_bad"), ("c", "b", "right")]
    board = leaderboard(votes, {"a": "Run A"})
    by = {s.model: s for s in board.standings}
    assert board.battles == 5 and [s.model for s in board.standings][0] == "a"
    assert (by["a"].wins, by["a"].losses, by["a"].ties, by["a"].label) == (2, 0, 2, "Run A")
    assert by["a"].win_rate == pytest.approx(3 / 4)
    assert (by["b"].wins, by["b"].losses, by["b"].ties) == (1, 2, 1)
    # the first vote by hand: both at 1000, expected 0.5, a gains 16
    assert leaderboard(votes[:1], {}).standings[0].elo == 1016.0
    assert sum(s.elo for s in board.standings) == pytest.approx(3000.0)  # Elo moves points, never makes them
    pair = leaderboard(votes, {}, models=["a", "b"])  # the model set {a, b}: their 3 battles only
    assert pair.battles == 3 and {s.model for s in pair.standings} == {"a", "b"}


def test_the_tabs_token_box_reads_its_default_and_bounds_from_the_schema(arena):
    import gradio as gr

    from trainer_core.serving.schemas import GenerationSettings
    from ui.arena_tab import build

    with gr.Blocks() as page:
        build(arena)
    (box,) = [c for c in page.blocks.values() if isinstance(c, gr.Number)]
    field = GenerationSettings.model_fields["max_new_tokens"]
    limits = {type(m).__name__: m for m in field.metadata}
    assert (box.value, box.minimum, box.maximum) == (field.default, limits["Ge"].ge, limits["Le"].le)
