"""The Chat tab's Send for a text-to-speech model (a CSM run, its checkpoint, its base): the typed
text is said in the chosen voice (``ChatEngine.speak``) and the chat shows the turn and the speech
as a player (a 16-bit wav written under the system temp folder, which Gradio serves, shown as the
Chatbot's audio message) with its duration; with *Base vs tuned* the run's base says it too, the
adapter switched off (``chat_send`` routes Send here for such a model)."""

from __future__ import annotations

import hashlib
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Union

import gradio as gr

from trainer_core.serving.engine import ChatEngine, ChatInputError, ChatUnavailable
from trainer_core.serving.schemas import Speech
from trainer_core.serving.voices import speaker
from ui import chat_audio, chat_checks, chat_handlers
from ui.refused import Refused

SPEECH_DIR = "studio-speech"  # the folder of the chat's speech files, under tempfile.gettempdir()
VOICE_LABEL = "Voice"
SPEECH_MARK = "🔊 "
NOTHING_SAID = "(no speech: the model ended before its first frame)"  # the answer for no samples


def speaks(engine: ChatEngine, model_id: Any) -> bool:
    """True when ``model_id`` names a text-to-speech model (one that serves speech)."""
    return chat_handlers.serves(engine, model_id) == "speech"


def boxes(engine: ChatEngine, model_id: Any) -> tuple[dict, dict]:
    """(the audio clip box, the voice box) for ``model_id``: a text-to-speech model hears no clip
    (its training rows carry audio, its chat does not) and takes a voice; others as ``audio_box``."""
    speech = speaks(engine, model_id)
    return (gr.update(visible=False) if speech else chat_audio.audio_box(engine, model_id)), gr.update(visible=speech)


def voice_of(values: tuple) -> Union[int, str]:
    """The voice in a send's ``values`` (the generation settings, the page's states, then the voice
    box; 0 where the call has no voice): a speaker number or name (``serving.voices.speaker``).
    Raises Refused naming the box for what that rule refuses."""
    rest = values[len(chat_checks.SETTINGS_FIELDS) + chat_checks.STATES :]
    try:
        return speaker(rest[0] if rest else 0)
    except ValueError as exc:
        raise Refused(
            f"{VOICE_LABEL}: {exc}; give a speaker of the run's training rows: a number (0, 1, ...) or, for a model "
            "trained on named speakers, a name"
        ) from None


def speak_send(
    engine: ChatEngine,
    model_id: str,
    compare: bool,
    message: str,
    history: list[dict],
    base_history: list[dict],
    *values: Any,
) -> Iterator[tuple]:
    """The typed text said by ``model_id`` (and, with ``compare``, by its base model) as a turn of
    the chat: the text, then a player of its speech. Yields ``chat_handlers.send``'s outputs.
    Refused beside Send, everything kept as it was, for empty text, a bad voice, ``base`` or whole
    weights with *Base vs tuned*, while training runs; a refusal from the model (a text too long
    for it) takes the turn back, the text in its box again."""
    settings_values, _image, images, _clip, clips = chat_handlers.attachments(values)
    text = message if isinstance(message, str) else ""
    try:
        chat_checks.checked_send(engine, model_id, compare, text, settings_values)
        voice = voice_of(values)
        if compare:
            _check_base(engine, model_id)
    except Refused as exc:
        yield text, history or [], base_history or [], gr.skip(), chat_checks.notice(exc), images, clips
        return
    before, base_before = list(history or []), list(base_history or [])
    turn = chat_handlers.shown_turn(text, None, None)
    history = [*before, turn, {"role": "assistant", "content": ""}]
    base_history = [*base_before, dict(turn), {"role": "assistant", "content": ""}] if compare else base_before
    sent, unsent = ([*images, None], [*clips, None]), (images, clips)  # the turn holds no image or clip
    try:
        state = yield from chat_handlers.loading(engine, model_id, lambda s: ("", history, base_history, s, "", *sent))
        history[-1] = answer(engine.speak(model_id, text, voice), voice)
        yield "", history, base_history, state, "", *sent
        if compare:
            base_history[-1] = answer(engine.speak(model_id, text, voice, use_adapter=False), voice)
            yield "", history, base_history, state, "", *sent
    except (ChatUnavailable, ChatInputError, Refused) as exc:
        yield chat_handlers.taken_back(
            engine, text, (history, before), (base_history, base_before), exc, (sent, unsent)
        )


def _check_base(engine: ChatEngine, model_id: str) -> None:
    """Refused for *Base vs tuned* on whole weights (a full fine-tune, a merged export): there is
    no adapter to switch off, so "the base" would say the tuned model's speech."""
    choice = engine.resolve(model_id)
    if choice.path and not choice.adapter:
        raise Refused(
            "Base vs tuned: this model is whole weights (a full fine-tune or a merged export), not a LoRA adapter on "
            "its base; untick it, or choose the base model to hear it"
        )


def answer(speech: Speech, voice: Union[int, str]) -> dict:
    """The chat's assistant message for ``speech``: a player of its wav (``speech_file``) and a line
    with its duration and voice; ``NOTHING_SAID`` for no samples."""
    if not len(speech.samples):
        return {"role": "assistant", "content": NOTHING_SAID}
    words = f"{SPEECH_MARK}{speech.seconds:.2f} s, voice {voice}"
    return {"role": "assistant", "content": [{"path": str(speech_file(speech))}, {"type": "text", "text": words}]}


def speech_file(speech: Speech) -> Path:
    """``speech`` written as a 16-bit mono wav at its own rate in ``SPEECH_DIR`` under the system
    temp folder (where Gradio serves files from; never the uploads folder, which holds only what
    users sent), named by its bytes' hash: the same speech said again adds no file."""
    from trainer_core.data.audio import wav_bytes

    data = wav_bytes(speech.samples, speech.sampling_rate)
    folder = Path(tempfile.gettempdir()) / SPEECH_DIR
    folder.mkdir(parents=True, exist_ok=True)
    target = folder / f"speech-{hashlib.sha256(data).hexdigest()[:16]}.wav"
    if not target.is_file():
        partial = target.with_suffix(f".{os.getpid()}.part")
        partial.write_bytes(data)
        partial.replace(target)  # whole or absent: two pages saying the same text never see half a file
    return target
