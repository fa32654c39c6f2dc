"""The Chat tab's Send, dispatched once on what the chosen model serves (``ModelChoice.serves``):
a text-to-speech model says the text (``chat_speech.speak_send``), a speech-to-text model
transcribes the turn's clip (``chat_transcribe.transcribe_send``), every other model chats
(``chat_handlers.send``; an audio-in or vision model hears or sees the turn's clip or image)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, Optional

from trainer_core.serving.engine import ChatEngine
from ui import chat_handlers, chat_speech, chat_transcribe

SENDERS = {"speech": chat_speech.speak_send, "transcriptions": chat_transcribe.transcribe_send}


def send(engine: ChatEngine, model_id: Optional[str], *inputs: Any) -> Iterator[tuple]:
    """Send for ``model_id``. ``inputs`` after the model id: compare, system prompt, message, both
    conversations, the generation settings, the page's states and the voice; the outputs are
    ``chat_handlers.send``'s. The speech senders take no system prompt (Whisper and CSM have none);
    an unknown id is refused by ``chat_handlers.send``."""
    sender = SENDERS.get(chat_handlers.serves(engine, model_id) or "")
    if sender is None:
        yield from chat_handlers.send(engine, model_id, *inputs)
        return
    compare, _system, message, history, base_history, *values = inputs
    yield from sender(engine, model_id, compare, message, history, base_history, *values)
