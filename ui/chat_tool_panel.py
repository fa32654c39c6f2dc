"""The Chat tab's Tools accordion and its *Send tool result*: the box of function definitions (a
ready example to start from), the tool choice, and the result boxes. A result goes to the oldest
call still waiting on its side (``chat_tools.results_for``: the base side takes *Tool result
(base)*, or *Tool result* when that is empty); a side whose calls all have their results answers
again, with the same settings, tools and seed, tuned with its adapter and base without."""

from __future__ import annotations

from collections.abc import Iterator
from functools import partial
from typing import Any, Optional

import gradio as gr

from trainer_core.serving.engine import ChatEngine, ChatInputError, ChatUnavailable
from trainer_core.tools.definitions import TOOL_CHOICES
from ui import chat_checks, chat_handlers, chat_tools
from ui.refused import Refused

QUIET = dict(api_name=False, show_progress="hidden", concurrency_limit=None)
PLACEHOLDER = '[{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object", ...}}}]'


class ToolsPanel:
    """The accordion's components; build it inside the Chat tab's layout, then ``wire`` it."""

    def __init__(self) -> None:
        with gr.Accordion("Tools (function calling)", open=False, elem_id="chat-tools-panel") as self.accordion:
            with gr.Row():
                self.examples = gr.Dropdown(
                    label=chat_tools.EXAMPLES_LABEL,
                    choices=list(chat_tools.EXAMPLES),
                    value=None,
                    elem_id="chat-tools-example",
                    info="Fills the box below; edit it as you like.",
                )
                self.choice = gr.Radio(
                    label=chat_tools.CHOICE_LABEL,
                    choices=list(TOOL_CHOICES),
                    value="auto",
                    elem_id="chat-tool-choice",
                    info="auto: the model decides; none: it may not call; required: its answer to each message is "
                    "a call (written by constrained decoding), its answer to the results is free.",
                )
            self.tools = gr.Textbox(
                label=chat_tools.TOOLS_LABEL,
                value="",  # a default: API callers (gradio_client) may leave it out
                lines=6,
                max_lines=24,
                placeholder=PLACEHOLDER,
                elem_id="chat-tools",
                info="OpenAI function definitions (JSON: a list of tools, or of bare function objects), as the "
                "API's tools take them. The model's calls are shown as calls; the studio never runs a tool: you "
                "type each result below.",
            )
            self.summary = gr.Markdown(chat_tools.summary(""), elem_id="chat-tools-summary")
            with gr.Row():
                self.result = gr.Textbox(
                    label=chat_tools.RESULT_LABEL,
                    value="",  # a default: API callers (gradio_client) may leave it out
                    lines=2,
                    scale=3,
                    elem_id="chat-tool-result",
                    placeholder="What the tool returned (JSON or text), for the oldest call still waiting",
                )
                self.base_result = gr.Textbox(
                    label=chat_tools.BASE_RESULT_LABEL,
                    value="",  # a default: API callers (gradio_client) may leave it out
                    lines=2,
                    scale=3,
                    visible=False,  # shown with Base vs tuned
                    elem_id="chat-tool-result-base",
                    placeholder="Empty: the same result as for the tuned model",
                )
                self.send = gr.Button("Send tool result", scale=1, elem_id="chat-tool-send")

    def inputs(self) -> list:
        """The Tools box and Tool choice, as a Send's last inputs (``chat_checks.TOOLS_AT``)."""
        return [self.tools, self.choice]

    def wire(self, engine: ChatEngine, model, compare, system, chats: tuple, widgets: list, media: tuple, page: tuple):
        """Wire the accordion; ``chats``: (tuned chat, base chat); ``media``: the states of the earlier
        turns' images and clips; ``page``: (load state line, notice beside Send, Clear button)."""
        chat, base_chat = chats
        state, notice, clear_btn = page
        model.change(partial(shown, engine), model, self.accordion, **QUIET)
        compare.change(lambda on: gr.update(visible=on), compare, self.base_result, **QUIET)
        self.examples.change(chat_tools.example, self.examples, self.tools, **QUIET)
        self.tools.change(chat_tools.summary, self.tools, self.summary, **QUIET)
        inputs = [model, compare, system, self.result, self.base_result, chat, base_chat, *widgets, *media]
        outputs = [self.result, self.base_result, chat, base_chat, state, notice]
        sent = partial(send_results, engine)
        self.send.click(sent, [*inputs, *self.inputs()], outputs, api_name="chat_tool_result", concurrency_limit=None)
        clear_btn.click(lambda: ("", ""), None, [self.result, self.base_result], **QUIET)


def shown(engine: ChatEngine, model_id: Any) -> dict:
    """The accordion for ``model_id``: shown for a chat model (or none chosen), hidden for a model
    that answers speech, transcriptions or embeddings (its Send takes no tools)."""
    return gr.update(visible=chat_handlers.serves(engine, model_id) in (None, "chat"))


def send_results(
    engine: ChatEngine,
    model_id: Optional[str],
    compare: bool,
    system: str,
    result: str,
    base_result: str,
    history: list[dict],
    base_history: list[dict],
    *values: Any,
) -> Iterator[tuple]:
    """Send the typed results to the calls waiting for them and stream each answered side's next
    answer. ``values``: the generation settings, the earlier turns' images and clips, the Tools box
    and the Tool choice. Yields (result box, base result box, chat, base chat, load state, notice);
    a refusal is a notice beside Send that keeps everything as it was."""
    fields = len(chat_checks.SETTINGS_FIELDS)
    images, clips, text, choice = [*values[fields:], None, None, None, None][:4]
    before, base_before = list(history or []), list(base_history or [])
    try:
        settings = chat_checks.checked_turn(engine, model_id, compare, values[:fields])
        tools = chat_tools.checked(text or "", choice or "auto")
        given = chat_tools.results_for(before, base_before if compare else [], result, base_result)
    except Refused as exc:
        yield gr.skip(), gr.skip(), before, base_before, gr.skip(), chat_checks.notice(exc)
        return
    sides = [before, base_before]
    answering = []
    for index, text_given in enumerate(given):
        if text_given is not None:
            sides[index] = chat_tools.answered(sides[index], text_given)
            if not chat_tools.pending(sides[index]):
                answering.append(index)
    if not answering:  # more calls wait for their results: nothing to answer yet
        yield "", "", *sides, gr.skip(), ""
        return
    try:
        state = yield from chat_handlers.loading(engine, model_id, lambda s: ("", "", *sides, s, ""))
        for index in answering:
            messages = chat_handlers.conversation(system, sides[index], None, images, None, clips, None)
            sides[index].append({"role": "assistant", "content": ""})
            yield from chat_handlers.stream_into(
                engine,
                model_id,
                messages,
                settings,
                index == 0,  # the tuned side with its adapter, the base side without
                sides[index],
                lambda _: ("", "", *sides, state, ""),
                tools.request(after_results=True),
            )
    except (ChatUnavailable, ChatInputError, Refused) as exc:
        yield _taken_back(engine, sides, (before, base_before), (result, base_result), exc)


def _taken_back(engine: ChatEngine, sides: list, before: tuple, typed: tuple, why: BaseException) -> tuple:
    """The outputs after a refusal cut the answers short: when no side had answered anything yet,
    the results back in their boxes and both chats as before; else the answers so far kept."""
    answered = any(
        chat_tools.content_text(side[-1]["content"]) for side, old in zip(sides, before) if len(side) > len(old) + 1
    )
    if not answered:
        return (*typed, *before, chat_handlers.loaded_words(engine), chat_checks.notice(why))
    kept = [side[:-1] if not chat_tools.content_text(side[-1]["content"]) else side for side in sides]
    return ("", "", *kept, chat_handlers.loaded_words(engine), chat_checks.notice(why))
