"""The Search tab, the playground of embedding models: a query against a list of passages (typed one
a line, or a file on the server), ranked by cosine similarity with the chosen model (an embedding
run, a checkpoint, their base, a merged export), the base model's ranking beside it on request.
The ranking is ``serving.search``'s; a refusal is a notice beside Search that names the field by
its label, never an error box."""

from __future__ import annotations

import time
from collections.abc import Iterator
from functools import partial
from pathlib import Path
from typing import Any, Optional

import gradio as gr
import pandas as pd

from trainer_core.paths import PathNotAllowed, confine
from trainer_core.refusals import Refusal
from trainer_core.serving.engine import ChatEngine, ChatInputError
from trainer_core.serving.search import MAX_SEARCH_PASSAGES, SearchResult, checked, search
from trainer_core.settings import Settings
from ui.refusals import markdown_text, notice_html

FREE = dict(concurrency_limit=None)  # the engine embeds one request at a time and queues the rest
LABELS = {
    "model": "Model",
    "query": "Query",
    "passages": "Passages",
    "passages_file": "Passages file",
    "compare": "Tuned beside base",
}
MAX_FILE_BYTES = 8_000_000  # a passages file read at most (about 1,000 passages of 8,000 characters)
COLUMNS = ["rank", "passage", "score"]
COMPARED = [*COLUMNS, "base rank", "base score", "rank change"]


def build(engine: ChatEngine, settings: Settings) -> None:
    """The Search tab, wired to ``engine`` (embeddings) and ``settings`` (the allowed folders)."""
    with gr.Tab("Search", id="search") as tab:
        with gr.Row():
            model = gr.Dropdown(
                label=LABELS["model"],
                choices=[],
                scale=4,
                elem_id="search-model",
                allow_custom_value=True,  # a job id from the API; checked by the engine
                info="An embedding run's final weights, one of its checkpoints, its base model, or a merged export.",
            )
            refresh = gr.Button("Refresh", size="sm", scale=1)
        state = gr.Markdown("No model loaded yet: the first search loads the chosen one.", elem_id="search-state")
        compare = gr.Checkbox(
            label=LABELS["compare"],
            value=True,
            elem_id="search-compare",
            info="The same query and passages ranked by the run's base model (the adapter switched off).",
        )
        query = gr.Textbox(label=LABELS["query"], placeholder="What to search for", elem_id="search-query")
        with gr.Row():
            passages = gr.Textbox(
                label=LABELS["passages"],
                lines=8,
                scale=3,
                elem_id="search-passages",
                placeholder=f"One passage a line (at most {MAX_SEARCH_PASSAGES})",
            )
            passages_file = gr.Textbox(
                label=LABELS["passages_file"],
                scale=1,
                elem_id="search-file",
                placeholder="Optional: a text file on the server (allowed folders), one passage a line",
            )
        run = gr.Button("Search", variant="primary", elem_id="search-run")
        notice = gr.HTML("", elem_id="search-notice")  # why a search did not run
        results = gr.Dataframe(
            headers=COMPARED, label="Ranked passages", interactive=False, wrap=True, elem_id="search-results"
        )
    listing = partial(model_dropdown, engine)
    tab.select(listing, model, model, api_name=False, **FREE)
    refresh.click(listing, model, model, api_name=False, **FREE)
    inputs = [model, compare, query, passages, passages_file]
    go = partial(run_search, engine, settings)
    run.click(go, inputs, [results, state, notice], api_name="search", **FREE)
    query.submit(go, inputs, [results, state, notice], api_name=False, **FREE)


def model_dropdown(engine: ChatEngine, selected: Optional[str] = None) -> dict:
    """Dropdown update listing the embedding models (``serves`` embeddings); no value while
    ``selected`` is still listed (what the user chose meanwhile stays), else the newest run's final
    weights."""
    choices = [c for c in engine.choices() if c.serves == "embeddings"]
    ids = [c.id for c in choices]
    listed = [(c.label, c.id) for c in choices]
    if selected in ids:
        return gr.update(choices=listed)
    runs = [i for i in ids if i != "base"]
    return gr.update(choices=listed, value=runs[0] if runs else ids[0] if ids else None)


def passages_of(text: Any, file: Any, settings: Settings) -> list[str]:
    """The passages: the typed lines, then the file's lines (blank lines left out). The file must lie
    in the allowed folders (the one path check) and hold at most ``MAX_FILE_BYTES`` of UTF-8 text;
    Refusal naming the field's label otherwise."""
    typed = text if isinstance(text, str) else ""
    found = [line.strip() for line in typed.splitlines() if line.strip()]
    if isinstance(file, str) and file.strip():
        label = LABELS["passages_file"]
        try:
            path = confine(file.strip(), settings.allowed_roots, label)
        except PathNotAllowed as exc:
            raise Refusal(str(exc), fields=("passages_file",)) from None
        if not path.is_file():
            raise Refusal(f"{label}: no file at {path}", fields=("passages_file",))
        if path.stat().st_size > MAX_FILE_BYTES:
            raise Refusal(f"{label}: larger than {MAX_FILE_BYTES:,} bytes; split it", fields=("passages_file",))
        try:
            lines = Path(path).read_text(encoding="utf-8").splitlines()
        except (OSError, UnicodeDecodeError):
            raise Refusal(f"{label}: not a UTF-8 text file (one passage a line)", fields=("passages_file",)) from None
        found.extend(line.strip() for line in lines if line.strip())
    return found


def in_words(error: Refusal) -> str:
    """``error``'s message with its field named by the label on screen ("passages: ..." becomes
    "Passages: ..."); an unknown model's message headed by the Model label."""
    message, field = str(error), (error.fields or ("",))[0]
    label = LABELS.get(field)
    if label is None:
        return message
    return label + message[len(field) :] if message.startswith(f"{field}:") else f"{label}: {message}"


def table(result: SearchResult, passages: list[str]) -> pd.DataFrame:
    """The passages best first: rank, passage, cosine score (and the base model's rank and score, and
    how many places the tuned model moved the passage: ▲ up, ▼ down)."""
    tuned, base = result.tuned, result.base
    rows = []
    for index in tuned.order:
        row = [tuned.ranks[index], passages[index], round(float(tuned.scores[index]), 4)]
        if base is not None:
            moved = base.ranks[index] - tuned.ranks[index]
            change = f"▲ {moved}" if moved > 0 else f"▼ {-moved}" if moved < 0 else "="
            row += [base.ranks[index], round(float(base.scores[index]), 4), change]
        rows.append(row)
    return pd.DataFrame(rows, columns=COMPARED if base is not None else COLUMNS)


def run_search(
    engine: ChatEngine, settings: Settings, model_id: Any, compare: Any, query: Any, text: Any, file: Any
) -> Iterator[tuple]:
    """Rank the passages against ``query``; yields (table, load state, notice). A refusal (no model,
    no query, no passages, too many, a path outside the allowed folders, a chat model, a training
    job that has the machine) is a notice naming the field, the table left as it was."""
    try:
        if not model_id or not isinstance(model_id, str):
            raise ChatInputError("model: choose an embedding model", fields=("model",))
        passages = passages_of(text, file, settings)
        choice = checked(engine, model_id, query, passages, bool(compare))  # all said before anything loads
        problem = engine.refusal()  # a training job has the machine
        if problem:
            raise Refusal(problem)
        label, loading = markdown_text(choice.label), engine.state().get("loaded") != model_id
        if loading:
            yield gr.skip(), f"Loading **{label}**…", ""
        began = time.monotonic()
        result = search(engine, model_id, query, passages, compare=bool(compare))
    except Refusal as exc:
        yield gr.skip(), _loaded_words(engine), notice_html(in_words(exc), "Not searched")
        return
    took = f"{time.monotonic() - began:.1f} s" + (", loading the model included" if loading else "")
    prompt = f"; the run's query prompt {result.query_prompt!r} went before the query" if result.query_prompt else ""
    words = f"**{label}** ranked {len(passages)} passages in {took}{markdown_text(prompt)}."
    yield table(result, passages), words, ""


def _loaded_words(engine: ChatEngine) -> str:
    """The load state line as it is now (never a stale "Loading ..." after a refusal)."""
    loaded = engine.state().get("loaded")
    return f"**{markdown_text(loaded)}** is loaded." if loaded else "No model loaded."
