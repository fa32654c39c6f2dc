"""The Arena tab: two models answer the same prompt side by side, their names hidden until the user
votes (A better, B better, tie, both bad); then the names show and the leaderboard (win rate with
its interval, Elo) counts the vote. Models are picked in two lists (or left to chance) from
everything the Chat tab offers; they load one at a time, and nothing runs while a job trains."""

from __future__ import annotations

import html
from collections.abc import Iterator
from functools import partial
from typing import Any, Optional

import gradio as gr
import pandas as pd
from pydantic import ValidationError

from trainer_core.arena.battle import Arena, ArenaError
from trainer_core.arena.schemas import BattleRequest, Vote
from trainer_core.fieldmeta import bounds
from trainer_core.serving.errors import ChatInputError, ChatUnavailable
from trainer_core.serving.schemas import GenerationSettings
from ui.chat_handlers import _choice_label
from ui.refusals import notice_html

RANDOM = ("any model, at random", "")
VOTES: list[tuple[str, Vote]] = [
    ("A is better", "left"),
    ("B is better", "right"),
    ("Tie", "tie"),
    ("Both are bad", "both_bad"),
]
COLUMNS = ["model", "battles", "wins", "losses", "ties", "win rate", "95% interval", "Elo"]
FREE = dict(concurrency_limit=None)


def model_lists(arena: Arena, first: Any = None, second: Any = None) -> tuple[Any, Any]:
    """Both pickers listing every model (``RANDOM`` first), keeping valid choices."""
    choices = [RANDOM, *((_choice_label(c), c.id) for c in arena.engine.choices())]
    ids = {value for _, value in choices}
    keep = [value if value in ids else "" for value in (first, second)]
    return gr.update(choices=choices, value=keep[0]), gr.update(choices=choices, value=keep[1])


def standings(arena: Arena) -> pd.DataFrame:
    """The leaderboard as the tab's table (best Elo first)."""
    rows = [
        [
            s.label,
            s.battles,
            s.wins,
            s.losses,
            s.ties,
            f"{s.win_rate:.0%}",
            f"{s.ci_low:.0%} – {s.ci_high:.0%}",
            round(s.elo),
        ]
        for s in arena.leaderboard().standings
    ]
    return pd.DataFrame(rows, columns=COLUMNS)


TOKENS = GenerationSettings.model_fields["max_new_tokens"]  # its default and bounds, once, in the schema
TOKENS_LABEL = "Max new tokens"
LABELS = {
    "prompt": "Prompt",
    "settings": TOKENS_LABEL,
    "max_new_tokens": TOKENS_LABEL,
    "models": "First model / Second model",
}


def _field_error(exc: Exception) -> str:
    """A refused battle's settings, each problem named by the field's label on the tab."""
    if not isinstance(exc, ValidationError):
        return f"{TOKENS_LABEL}: {exc}"
    return "; ".join(
        f"{LABELS.get(str(e['loc'][0]), e['loc'][0]) if e['loc'] else 'Battle'}: {e['msg']}" for e in exc.errors()
    )


def battle(arena: Arena, first: Any, second: Any, prompt: Any, max_new_tokens: Any) -> Iterator[tuple]:
    """Run a battle: (answer A, answer B, notice, battle id, *vote buttons). A refusal (training
    running, unknown or identical models, an empty prompt) is said in the notice; nothing else changes."""
    keep = (gr.skip(), gr.skip())
    if not isinstance(prompt, str) or not prompt.strip():
        yield (
            *keep,
            notice_html("Prompt: type what both models should answer.", "Not started"),
            gr.skip(),
            *_buttons(False),
        )
        return
    picked = [m for m in (first, second) if isinstance(m, str) and m]  # one: the other at random
    try:
        settings = GenerationSettings(max_new_tokens=int(max_new_tokens or TOKENS.default))
        request = BattleRequest(prompt=prompt, models=picked, settings=settings)
    except (ValueError, TypeError) as exc:
        yield (*keep, notice_html(_field_error(exc), "Not started"), gr.skip(), *_buttons(False))
        return
    yield ("", "", "<p class='arena-wait'>Both models are answering, one after the other…</p>", None, *_buttons(False))
    try:
        found = arena.battle(request)
    except (ChatUnavailable, ChatInputError, ArenaError) as exc:
        yield ("", "", notice_html(str(exc), "Not started"), None, *_buttons(False))
        return
    yield (found.left.text, found.right.text, "", found.battle_id, *_buttons(True))


def vote(arena: Arena, choice: Vote, battle_id: Optional[str]) -> tuple:
    """Record the vote: (notice revealing the names, leaderboard, *vote buttons off)."""
    if not battle_id:
        return (notice_html("Start a battle first, then vote.", "Not counted"), gr.skip(), *_buttons(False))
    try:
        found = arena.vote(battle_id, choice)
    except ArenaError as exc:
        return (notice_html(str(exc), "Not counted"), gr.skip(), *_buttons(False))
    verdict = dict((value, label) for label, value in VOTES)[choice]
    shown = (
        f"<p class='arena-reveal'>You voted <strong>{html.escape(verdict)}</strong>. "
        f"A was <strong>{html.escape(found.left.label or '')}</strong>, "
        f"B was <strong>{html.escape(found.right.label or '')}</strong>.</p>"
    )
    return (shown, standings(arena), *_buttons(False))


def _buttons(on: bool) -> list[Any]:
    return [gr.update(interactive=on) for _ in VOTES]


def build(arena: Arena) -> None:
    """The tab (``#arena-*`` element ids), wired to ``arena``."""
    with gr.Tab("Arena", id="arena") as tab:
        gr.Markdown(
            "Two models answer the same prompt; which is which stays hidden until you vote. "
            "Votes are kept in the run history and counted below."
        )
        with gr.Row():
            first = gr.Dropdown(label="First model", choices=[RANDOM], value="", elem_id="arena-first")
            second = gr.Dropdown(label="Second model", choices=[RANDOM], value="", elem_id="arena-second")
            refresh = gr.Button("Refresh", size="sm", scale=0)
        prompt = gr.Textbox(label="Prompt", lines=3, elem_id="arena-prompt")
        with gr.Row():
            tokens = gr.Number(label=TOKENS_LABEL, value=TOKENS.default, precision=0, scale=1, **bounds(TOKENS))
            start = gr.Button("Battle", variant="primary", elem_id="arena-battle", scale=2)
        with gr.Row():
            left = gr.Textbox(label="Model A", lines=8, interactive=False, elem_id="arena-left")
            right = gr.Textbox(label="Model B", lines=8, interactive=False, elem_id="arena-right")
        with gr.Row():
            buttons = [gr.Button(label, interactive=False, elem_id=f"arena-vote-{value}") for label, value in VOTES]
        notice = gr.HTML("", elem_id="arena-notice")
        table = gr.Dataframe(
            value=pd.DataFrame(columns=COLUMNS), label="Leaderboard", elem_id="arena-leaderboard", interactive=False
        )
        battle_id = gr.State(None)
    lists = partial(model_lists, arena)
    tab.select(lists, [first, second], [first, second], api_name=False, **FREE)
    tab.select(partial(standings, arena), None, table, api_name=False, **FREE)
    refresh.click(lists, [first, second], [first, second], api_name=False, **FREE)
    start.click(
        partial(battle, arena),
        [first, second, prompt, tokens],
        [left, right, notice, battle_id, *buttons],
        api_name="arena_battle",
        **FREE,
    )
    for button, (_, value) in zip(buttons, VOTES):
        button.click(
            partial(vote, arena, value), battle_id, [notice, table, *buttons], api_name=f"arena_vote_{value}", **FREE
        )
