"""The "Make a dataset from documents" accordion of the Train tab: sources (documents uploaded or on
the server, a seed dataset, topics; chunk sizes), the recipe (a built-in template in an editable
YAML box, checked on each change, its columns listed), the writer model (endpoint, default this
studio's own /v1; model; key; requests at once), a preview of 5 rows with the full run's estimate,
Run / Stop / Resume as a task with its progress, and the results with their data card, download and
*Use this dataset* (which fills the Train form's data fields). What the events do lives in
``ui.recipe_form``, ``ui.recipe_run`` and ``ui.recipe_results``.

(No ``from __future__ import annotations``: Gradio finds the ``gr.Request`` parameter by its
evaluated annotation.)"""

from collections.abc import Callable
from typing import Any, Optional

import gradio as gr
import pandas as pd

from trainer_core.recipes.library import template_names, template_text
from trainer_core.recipes.preview import PREVIEW_RECORDS
from trainer_core.recipes.push_request import DatasetPushRequest
from ui import recipe_form as form
from ui import recipe_results, recipe_run
from ui.context import Context
from ui.tables import fit_table

FIRST_TEMPLATE = "qa_from_documents"
TEMPLATE_LABEL = "Recipe template"
FREE = dict(concurrency_limit=None)


def own_endpoint(request: gr.Request) -> str:
    """This studio's own /v1 as the server reaches itself: loopback at the port the page came in on."""
    scope = getattr(getattr(request, "request", None), "scope", None) or {}
    server = scope.get("server") if isinstance(scope, dict) else None
    port = server[1] if server and len(server) > 1 and server[1] else None
    return f"http://127.0.0.1:{port}/v1" if port else ""


def fields_of(*values: Any) -> form.PageFields:
    """The page's fields (``SOURCE_FIELDS`` then ``WRITER_FIELDS`` order) as ``PageFields``."""
    return form.PageFields(*values)


def _sources(numbers: tuple[Any, Any, Any]) -> dict[str, gr.components.Component]:
    with gr.Row():
        docs = gr.File(
            label=form.DOCS_LABEL,
            file_count="multiple",
            file_types=form.DOCUMENT_TYPES,
            type="filepath",
            elem_id="recipe-docs",
        )
        with gr.Column():
            paths = gr.Textbox(label=form.DOC_PATHS_LABEL, elem_id="recipe-doc-paths", info="Comma-separated.")
            seed = gr.Textbox(label=form.SEED_LABEL, elem_id="recipe-seed", info="A .json / .jsonl file's rows.")
            topics = gr.Textbox(label=form.TOPICS_LABEL, lines=2, elem_id="recipe-topics")
    with gr.Row():
        chunk = gr.Number(label=form.CHUNK_LABEL, elem_id="recipe-chunk", **{**form.CHUNK_BOUNDS, "value": numbers[0]})
        overlap = gr.Number(
            label=form.OVERLAP_LABEL, elem_id="recipe-overlap", **{**form.OVERLAP_BOUNDS, "value": numbers[1]}
        )
        tokenizer = gr.Textbox(label=form.TOKENIZER_LABEL, value=form.TOKENIZER_DEFAULT, elem_id="recipe-tokenizer")
    return {
        "docs": docs, "paths": paths, "seed": seed, "topics": topics, "chunk": chunk, "overlap": overlap,
        "tokenizer": tokenizer,
    }  # fmt: skip


def _writer(numbers: tuple[Any, Any, Any]) -> dict[str, gr.components.Component]:
    with gr.Row():
        endpoint = gr.Textbox(
            label=form.ENDPOINT_LABEL, elem_id="recipe-endpoint", info="This studio's own /v1 to start with."
        )
        model = gr.Textbox(label=form.MODEL_LABEL, value="base", elem_id="recipe-model")
        key = gr.Textbox(label=form.KEY_LABEL, type="password", elem_id="recipe-key", info="Empty for this studio.")
        concurrency = gr.Number(
            label=form.CONCURRENCY_LABEL,
            elem_id="recipe-concurrency",
            **{**form.CONCURRENCY_BOUNDS, "value": numbers[2]},
        )
    return {"endpoint": endpoint, "model": model, "key": key, "concurrency": concurrency}


def build(ctx: Context) -> dict[str, Any]:
    """The accordion (closed) and its components."""
    with gr.Accordion("Make a dataset from documents", open=False, elem_id="section-recipes"):
        gr.Markdown(
            "Turn documents, seed rows or topics into training rows with a model, checked by the recipe's gates."
        )
        first = template_text(FIRST_TEMPLATE)
        numbers = form.recipe_numbers(first)
        block = _sources(numbers)
        with gr.Row():
            block["template"] = gr.Dropdown(
                template_names(), value=FIRST_TEMPLATE, label=TEMPLATE_LABEL, elem_id="recipe-template"
            )
        block["recipe"] = gr.Code(
            first, language="yaml", label=form.RECIPE_LABEL, interactive=True,
            elem_id="recipe-yaml",
        )  # fmt: skip
        block["columns"] = gr.Markdown(form.columns_text(first), elem_id="recipe-columns")
        block.update(_writer(numbers))
        with gr.Row():
            block["preview"] = gr.Button(f"Preview {PREVIEW_RECORDS} rows", size="sm", elem_id="recipe-preview")
            block["run"] = gr.Button("Run", variant="primary", size="sm", elem_id="recipe-run")
            block["stop"] = gr.Button("Stop", variant="stop", size="sm", elem_id="recipe-stop")
            block["resume"] = gr.Button("Resume", size="sm", elem_id="recipe-resume")
        block["said"] = gr.HTML("", elem_id="recipe-notice")
        block["estimate"] = gr.Markdown("", elem_id="recipe-estimate")
        block["rows"] = fit_table(pd.DataFrame(columns=recipe_run.PREVIEW_COLUMNS), "recipe-rows", 320)
        block["status"] = gr.Markdown("", elem_id="recipe-status")
        block["task"] = gr.State(None)
        with gr.Row():
            block["result"] = gr.Dropdown(
                [], label=recipe_results.RESULT_LABEL, elem_id="recipe-result",
                info="Resume goes on with this result when its run was stopped.",
            )  # fmt: skip
            block["refresh"] = gr.Button("Refresh", size="sm", min_width=60, elem_id="recipe-refresh")
            block["use"] = gr.Button("Use this dataset", variant="primary", size="sm", elem_id="recipe-use")
        block["results"] = fit_table(pd.DataFrame(columns=recipe_results.COLUMNS), "recipe-results", 240)
        block["download"] = gr.File(label="Dataset file", interactive=False, elem_id="recipe-download")
        block["card"] = gr.Markdown("", elem_id="recipe-card")
        block.update(_push())
    return block


def _push() -> dict[str, gr.components.Component]:
    """The chosen result's push to a Hub dataset repo: repository, private, token, *Push*, status."""
    fields, labels = DatasetPushRequest.model_fields, recipe_results.PUSH_LABELS
    with gr.Accordion("Push this result to the Hugging Face Hub", open=False, elem_id="recipe-push-panel"):
        with gr.Row():
            repo = gr.Textbox(
                label=labels["repo_id"], placeholder="your-name/my-dataset", info=fields["repo_id"].description,
                elem_id="recipe-push-repo", scale=2,
            )  # fmt: skip
            private = gr.Checkbox(
                label=labels["private"], value=fields["private"].default, info=fields["private"].description
            )
            token = gr.Textbox(label=labels["token"], type="password", info=fields["token"].description)
            button = gr.Button("Push", size="sm", elem_id="recipe-push")
        status = gr.Markdown("", elem_id="recipe-push-status")
    return {"push_repo": repo, "push_private": private, "push_token": token, "push": button, "push_status": status}


SOURCE_FIELDS = ("docs", "paths", "seed", "topics", "chunk", "overlap", "tokenizer")
WRITER_FIELDS = ("endpoint", "model", "concurrency")


def wire(
    ctx: Context, block: dict, train: dict, loads: list, refresh_preview: Optional[Callable[[Any], Any]] = None
) -> None:
    """The panel's events. ``train``: the Train form's ``upload``, ``paths`` and the widgets
    ``recipe_results.USE_FIELDS`` that *Use this dataset* sets; ``loads``: the page's load (the
    endpoint and the results are read then); ``refresh_preview(event)`` refreshes the Train tab's
    dataset preview after *Use this dataset*."""
    settings, tasks = ctx.settings, ctx.tasks
    fields = [block[n] for n in (*SOURCE_FIELDS, *WRITER_FIELDS)]
    said, status, result = block["said"], block["status"], block["result"]
    listed = [block["results"], result]
    shown = [block["recipe"], block["columns"], block["chunk"], block["overlap"], block["concurrency"]]
    block["template"].change(_template, block["template"], shown, api_name=False, **FREE)
    block["recipe"].change(
        lambda text: form.columns_text(text), block["recipe"], block["columns"], api_name=False,
        trigger_mode="always_last", **FREE,
    )  # fmt: skip
    block["preview"].click(
        lambda text, key, *values: recipe_run.preview(tasks, text, fields_of(*values), key),
        [block["recipe"], block["key"], *fields],
        [block["rows"], block["estimate"], said],
        api_name="recipe_preview",
        concurrency_limit=1,
        concurrency_id="recipe-preview",
    )

    def run(text: str, key: str, *values: Any) -> Any:
        yield from recipe_run.run(tasks, text, fields_of(*values), key)

    def resume(key: str, name: str) -> Any:
        try:
            recipe_results.result_folder(name, settings)
        except recipe_results.NoResult as exc:
            yield "", None, form.notice(str(exc), "not_found")
            return
        yield from recipe_run.run(tasks, "", form.PageFields(), key, resume=name)

    outputs = [status, block["task"], said]
    ran = block["run"].click(run, [block["recipe"], block["key"], *fields], outputs, api_name="recipe_run", **FREE)
    resumed = block["resume"].click(resume, [block["key"], result], outputs, api_name="recipe_resume", **FREE)
    block["stop"].click(lambda: recipe_run.stop(tasks), None, said, api_name="recipe_stop", **FREE)
    for event in (ran, resumed):
        event.then(lambda chosen: recipe_results.refresh(settings), result, listed, api_name=False, **FREE)

    def push(name: str, repo: str, private: bool, token: str) -> Any:
        yield from recipe_results.push(tasks, name, repo, private, token)

    block["push"].click(
        push,
        [result, block["push_repo"], block["push_private"], block["push_token"]],
        block["push_status"],
        api_name="recipe_push",
        **FREE,
    )
    block["refresh"].click(
        lambda chosen: recipe_results.refresh(settings, chosen), result, listed, api_name="recipe_results", **FREE
    )
    result.change(
        lambda name: recipe_results.card(settings, name), result, [block["card"], block["download"], said],
        api_name=False, **FREE,
    )  # fmt: skip
    used = block["use"].click(
        lambda name: recipe_results.use(settings, name),
        result,
        [train["upload"], train["paths"], *(train[f] for f in recipe_results.USE_FIELDS), said],
        api_name="recipe_use",
        **FREE,
    )
    if refresh_preview is not None:
        refresh_preview(used)
    for load in loads:
        load(own_endpoint, None, block["endpoint"], api_name=False, show_progress="hidden", **FREE)
        load(lambda: recipe_results.refresh(settings), None, listed, api_name=False, show_progress="hidden", **FREE)


def _template(name: str) -> tuple[Any, ...]:
    """(recipe YAML, its columns, chunk size, overlap, requests at once) of the built-in template
    ``name``; an unknown name leaves the fields as they are."""
    if name not in template_names():
        said = form.notice(f"{TEMPLATE_LABEL}: '{str(name)[:60]}' is not a built-in recipe", "not_found")
        return gr.update(), gr.update(value=said), gr.update(), gr.update(), gr.update()
    text = template_text(name)
    numbers = form.recipe_numbers(text)
    return gr.update(value=text), gr.update(value=form.columns_text(text)), *(gr.update(value=n) for n in numbers)
