"""Functions behind the Chat tab: pick a model, load it, stream answers (one model, or base vs tuned
side by side), stop, clear. They talk to the shared ``ChatEngine``; every refusal is a ``gr.Error``
that says why (a training job has the machine, a run without weights, a prompt too long)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any, Optional

import gradio as gr

from trainer_core.serving.engine import ChatEngine, ChatInputError, ChatUnavailable
from trainer_core.serving.schemas import ChatMessage, GenerationSettings, ModelChoice
from ui import chat_audio, chat_tools
from ui.chat_checks import MODEL_LABEL, SETTINGS_FIELDS, checked_send, choice_of, notice, tool_settings
from ui.chat_images import shown_text, user_turn
from ui.refusals import markdown_text
from ui.refused import Refused


def _choice_label(choice: ModelChoice) -> str:
    return choice.label


def serves(engine: ChatEngine, model_id: Any) -> Optional[str]:
    """What ``model_id``'s model answers ("chat", "transcriptions", "speech", "embeddings";
    ``ModelChoice.serves``); None for no id or one that names nothing usable."""
    if not isinstance(model_id, str) or not model_id:
        return None
    try:
        return engine.resolve(model_id).serves
    except ChatInputError:
        return None


def model_dropdown(engine: ChatEngine, selected: Optional[str] = None) -> dict:
    """Dropdown update listing the base model and every usable run and checkpoint (newest first).
    While ``selected`` is still listed the update carries no value, so a model the user chose or
    typed while the list was on its way stays chosen; else the newest run's weights (the base
    model when there is no run; None for an empty list)."""
    return model_listing(engine, selected)[0]


def model_listing(engine: ChatEngine, selected: Optional[str] = None, seen: Optional[str] = None) -> tuple:
    """(``model_dropdown``'s update, the newest run's id): ``seen``, the newest run's id at this
    page's previous listing, chooses that newer run when another has finished since (the run just
    trained is preselected, not the model chosen before it)."""
    choices = engine.choices()
    ids = [c.id for c in choices]
    listed = [(_choice_label(c), c.id) for c in choices]
    newest = newest_run(choices)
    if selected in ids and (seen is None or newest == seen):
        return gr.update(choices=listed), newest
    return gr.update(choices=listed, value=newest or (ids[0] if ids else None)), newest


def newest_run(choices: list[ModelChoice]) -> Optional[str]:
    """The id of the newest run's weights among ``choices`` (``engine.choices()``), None without runs."""
    return next((c.id for c in choices if c.kind != "base"), None)


def load(engine: ChatEngine, model_id: Optional[str]) -> Iterator[str]:
    """Load ``model_id`` into the inference worker, showing a loading state and then its time."""
    if not model_id or not isinstance(model_id, str):
        raise Refused(f"{MODEL_LABEL}: choose a model to talk to.")
    label = markdown_text(_label_of(engine, model_id))
    yield f"Loading **{label}**…"
    started = time.monotonic()
    try:
        seconds = engine.load(model_id)
    except (ChatUnavailable, ChatInputError) as exc:
        raise Refused(str(exc)) from None
    took = seconds if seconds else time.monotonic() - started
    yield f"**{label}** is loaded ({took:.1f} s)."


def load_button(engine: ChatEngine, model_id: Optional[str]) -> Iterator[str]:
    """The Load button: ``load``, with a refusal said in the load state line (nothing marked as an
    error; the line never stays at "Loading ...")."""
    try:
        yield from load(engine, model_id)
    except Refused as exc:
        yield f"**Not loaded:** {markdown_text(exc.message)}"


def _label_of(engine: ChatEngine, model_id: str) -> str:
    return choice_of(engine, model_id).label


def conversation(
    system: str,
    history: list[dict],
    message: Optional[str],
    images: Optional[list[Optional[str]]] = None,
    image: Optional[str] = None,
    clips: Optional[list[Optional[str]]] = None,
    clip: Optional[str] = None,
) -> list[ChatMessage]:
    """The messages sent to the model: the system prompt (if any), the earlier turns (tool calls and
    results as ``chat_tools.add_turn`` reads them), the new one (none for ``message`` None: an
    answer to tool results). Without a system prompt the chat template's own default applies, exactly
    as in training.
    ``images``: the earlier user turns' images in order (None for a turn without; ``chat_images``);
    ``image``: the new turn's; ``clips`` / ``clip``: the same for audio clips (``chat_audio``)."""
    turns = [ChatMessage(role="system", content=system.strip())] if system and system.strip() else []
    pictures, sounds = iter(images or []), iter(clips or [])
    for m in history:
        if chat_tools.add_turn(turns, m):
            continue
        if m.get("role") == "user":
            picture, sound = next(pictures, None), next(sounds, None)
            text = chat_tools.content_text(m["content"])
            text = shown_text(text) if picture else text
            text = chat_audio.shown_text(text, sound) if sound else text
            turns.append(ChatMessage(role="user", content=text, images=_one(picture), audios=_one(sound)))
        elif m.get("role") == "assistant":
            turns.append(ChatMessage(role="assistant", content=chat_tools.content_text(m["content"])))
    if message is None:
        return turns
    return turns + [ChatMessage(role="user", content=message, images=_one(image), audios=_one(clip))]


def _one(item: Optional[str]) -> list[str]:
    return [item] if item else []


def attachments(values: tuple) -> tuple[tuple, Optional[str], list, Optional[str], list]:
    """A send's ``values`` split: (the generation settings' values, the held image's data: URL, the
    earlier turns' images, the held clip's data: URL, the earlier turns' clips); the page's states,
    absent from an API call, read as none."""
    settings_values, extra = values[: len(SETTINGS_FIELDS)], [*values[len(SETTINGS_FIELDS) :], None, None, None, None]
    image, clip = (item if isinstance(item, str) else None for item in (extra[0], extra[2]))
    return settings_values, image, list(extra[1] or []), clip, list(extra[3] or [])


def shown_turn(message: str, image: Optional[str], clip: Optional[str]) -> dict:
    """The chat's display of a user turn with its image and clip marks (``chat_images``, ``chat_audio``)."""
    return user_turn(chat_audio.with_clip(message, clip), image)


def send(
    engine: ChatEngine,
    model_id: Optional[str],
    compare: bool,
    system: str,
    message: str,
    history: list[dict],
    base_history: list[dict],
    *values: Any,
) -> Iterator[tuple]:
    """Stream the answer to ``message`` into the chat (and, with ``compare``, the base model's answer
    with the same settings and seed into the second column), loading the model first when another
    is loaded. Yields (textbox, chat, base chat, load state, notice, earlier turns' images, earlier
    turns' clips). ``values``: the generation settings, then (the page's states, ``attachments``)
    the held image, the earlier turns' images, the held clip and the earlier turns' clips, then the
    voice, the Tools box and the Tool choice (``TOOLS_AT``: the model's calls are shown as calls,
    ``chat_tools``; a message is refused while a call waits for its result). A refusal
    (a training job has the machine, a run without weights, a bad setting, ...) is a notice beside
    Send that keeps the typed message, the image, the clip and the conversation as they were;
    nothing is marked as an error."""
    settings_values, image, images, clip, clips = attachments(values)
    try:
        settings = checked_send(engine, model_id, compare, message, settings_values, clip)
        tools = chat_tools.for_message(tool_settings(values), history, base_history if compare else [])
    except Refused as exc:  # everything as it was: the typed message, both conversations
        kept = message if isinstance(message, str) else ""
        yield kept, history or [], base_history or [], gr.skip(), notice(exc), images, clips
        return
    before, base_before = list(history or []), list(base_history or [])
    turn = shown_turn(message, image, clip)
    history = [*before, turn, {"role": "assistant", "content": ""}]
    base_history = [*base_before, dict(turn), {"role": "assistant", "content": ""}] if compare else base_before
    sent_images, sent_clips = [*images, image], [*clips, clip]
    try:
        state = yield from loading(
            engine, model_id, lambda s: ("", history, base_history, s, "", sent_images, sent_clips)
        )
        tuned = yield from stream_into(
            engine,
            model_id,
            conversation(system, before, message, images, image, clips, clip),
            settings,
            True,
            history,
            lambda h: ("", h, base_history, state, "", sent_images, sent_clips),
            tools.request(),
        )
        speeds = [("Tuned" if compare else "Answer", tuned)]
        if compare:
            base_speed = yield from stream_into(
                engine,
                model_id,
                conversation(system, base_before, message, images, image, clips, clip),
                settings,
                False,
                base_history,
                lambda h: ("", history, h, state, "", sent_images, sent_clips),
                tools.request(),
            )
            speeds.append(("base", base_speed))
        line = f"{state} {speed_words(speeds)}" if isinstance(state, str) else state
        yield "", history, base_history, line, "", sent_images, sent_clips
    except (ChatUnavailable, ChatInputError, Refused) as exc:
        sent, unsent = (sent_images, sent_clips), (images, clips)
        yield taken_back(engine, message, (history, before), (base_history, base_before), exc, (sent, unsent))


def loading(engine: ChatEngine, model_id: str, outputs) -> Iterator[tuple]:
    """Load ``model_id`` when another model (or none) is loaded, yielding ``outputs(load state)``
    at each step (once, saying so, when it is loaded already: by another page, or before this page
    was opened). Returns the last load state line."""
    if engine.state().get("loaded") != model_id:
        state = gr.update()
        for state in load(engine, model_id):
            yield outputs(state)
        return state
    state = loaded_words(engine)
    yield outputs(state)
    return state


def taken_back(engine: ChatEngine, message: str, tuned: tuple, base: tuple, why: BaseException, media: tuple) -> tuple:
    """The send's outputs after a refusal (``why``) cut it short: the message back in its box and a
    turn with no answer yet taken back (a partial answer stays, with its image and clip). ``tuned``
    / ``base``: (the conversation as sent, the conversation before it); ``media``: ((earlier turns'
    images, clips) as sent, the same before it)."""
    (history, before), (base_history, base_before) = tuned, base
    answered = bool(chat_tools.content_text(history[-1]["content"]))
    return (
        gr.skip() if answered else message,
        history if answered else before,
        base_history if answered else base_before,
        loaded_words(engine),
        notice(why),
        *(media[0] if answered else media[1]),
    )


def loaded_words(engine: ChatEngine) -> str:
    """The load state line as it is now (never a stale "Loading ..." after a refusal)."""
    loaded = engine.state().get("loaded")
    if not loaded:
        return "No model loaded: the next message loads the chosen one."
    try:
        return f"**{markdown_text(engine.resolve(loaded).label)}** is loaded."
    except ChatInputError:
        return f"**{markdown_text(loaded)}** is loaded."


def stream_into(
    engine: ChatEngine,
    model_id: str,
    messages: list[ChatMessage],
    settings: GenerationSettings,
    use_adapter: bool,
    history: list[dict],
    outputs,
    tools: Optional[dict[str, Any]] = None,
) -> Iterator[tuple]:
    """Append streamed text to the last (assistant) message of ``history``, yielding after each
    piece; with ``tools`` (``ChatEngine.stream``'s ``tools`` and ``tool_choice``) the answer's calls
    follow as calls (``chat_tools.show_calls``). Returns (tokens answered, seconds from the request
    to the last token)."""
    answer, event, began = "", None, time.monotonic()
    for event in engine.stream(model_id, messages, settings, use_adapter=use_adapter, **(tools or {})):
        answer += event.delta
        if event.finish_reason == "cancelled":
            answer += " [stopped]"
        elif event.finish_reason == "length":
            answer += " [max_new_tokens reached]"
        history[-1] = {"role": "assistant", "content": answer}
        yield outputs(history)
    seconds = time.monotonic() - began
    if event is not None and event.tool_calls:
        chat_tools.show_calls(history, event.tool_calls)
        yield outputs(history)
    return (event.completion_tokens if event is not None else None) or 0, seconds


def speed_words(speeds: list[tuple[str, tuple[int, float]]]) -> str:
    """ "Answer: 24 tokens in 3.2 s, 7.5 tokens/s." (or tuned and base each) for the load state
    line: the seconds from the request to the last token, the prompt's reading included."""
    said = [
        f"{name}: {tokens} tokens in {seconds:.1f} s, {tokens / seconds:.1f} tokens/s"
        for name, (tokens, seconds) in speeds
        if tokens and seconds > 0
    ]
    return f"{'; '.join(said)}." if said else ""


def stop(engine: ChatEngine) -> None:
    """Stop the answer being generated (it ends with "[stopped]")."""
    if not engine.stop_generation():
        gr.Info("Nothing is being generated.")


def clear() -> tuple[list, list, str, str, list, None, list, None]:
    """Empty both chats, the message box, the notice, the earlier turns' images, the image box, the
    earlier turns' clips and the audio box."""
    return [], [], "", "", [], None, [], None
