"""The Chat tab's Send: a speech-to-text model (a Whisper run, its checkpoint, its base) transcribes
the turn's clip (``ChatEngine.transcribe``; the run's base beside it with *Base vs tuned*, its adapter
switched off), the transcript shown as the model's answer (``chat_send`` routes Send here for such a model)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import gradio as gr

from trainer_core.serving.engine import ChatEngine, ChatInputError, ChatUnavailable
from ui import chat_checks, chat_handlers
from ui.chat_audio import AUDIO_LABEL
from ui.refused import Refused

NOTHING_HEARD = "(no words heard)"  # the answer shown for an empty transcript


def transcribes(engine: ChatEngine, model_id: Any) -> bool:
    """True when ``model_id`` names a speech-to-text model (one that serves transcriptions)."""
    return chat_handlers.serves(engine, model_id) == "transcriptions"


def transcribe_send(
    engine: ChatEngine,
    model_id: str,
    compare: bool,
    message: str,
    history: list[dict],
    base_history: list[dict],
    *values: Any,
) -> Iterator[tuple]:
    """The held clip transcribed by ``model_id`` (and, with ``compare``, by its base model) as a
    turn of the chat: the clip's mark and the typed text (optional: the model hears the clip
    alone), then the transcript. Yields ``chat_handlers.send``'s outputs. Refused beside Send,
    everything kept as it was, without a clip, for ``base`` with *Base vs tuned*, while training
    runs; a failed transcription takes the turn back."""
    settings_values, _image, images, clip, clips = chat_handlers.attachments(values)
    text = message if isinstance(message, str) else ""
    try:
        if not clip:
            raise Refused(f"{AUDIO_LABEL}: record or upload a clip for this speech-to-text model to transcribe.")
        chat_checks.checked_send(engine, model_id, compare, text, settings_values, clip)
    except Refused as exc:
        yield text, history or [], base_history or [], gr.skip(), chat_checks.notice(exc), images, clips
        return
    before, base_before = list(history or []), list(base_history or [])
    turn = chat_handlers.shown_turn(text, None, clip)
    history = [*before, turn, {"role": "assistant", "content": ""}]
    base_history = [*base_before, dict(turn), {"role": "assistant", "content": ""}] if compare else base_before
    sent, unsent = ([*images, None], [*clips, clip]), (images, clips)
    try:
        state = yield from chat_handlers.loading(engine, model_id, lambda s: ("", history, base_history, s, "", *sent))
        history[-1] = _answer(engine.transcribe(model_id, clip).text)
        yield "", history, base_history, state, "", *sent
        if compare:
            base_history[-1] = _answer(engine.transcribe(model_id, clip, use_adapter=False).text)
            yield "", history, base_history, state, "", *sent
    except (ChatUnavailable, ChatInputError, Refused) as exc:
        yield chat_handlers.taken_back(
            engine, text, (history, before), (base_history, base_before), exc, (sent, unsent)
        )


def _answer(transcript: str) -> dict:
    return {"role": "assistant", "content": transcript or NOTHING_HEARD}
