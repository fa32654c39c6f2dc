"""The voice a text-to-speech run is asked to speak in: the one rule the API and the Chat tab read.

A voice is a speaker as the run's ``speaker_column`` gave it: a number (CSM's numbered voices: "0",
"1", ...) or a name (an Orpheus-style run's speakers, e.g. "tara"). Which of the two a model takes
is the model's own check (``kinds.text_to_speech.serve`` refuses a name); this is the shape only.
"""

from __future__ import annotations

from typing import Any, Union

MAX_VOICE = 1_000_000  # the largest speaker number
MAX_VOICE_CHARS = 200  # the longest speaker name


def speaker(value: Any) -> Union[int, str]:
    """``value`` (a number or text) as a speaker: a whole number from 0 to ``MAX_VOICE`` as int, any
    other text (stripped, 1 to ``MAX_VOICE_CHARS`` characters) as a name. Raises ValueError, a
    message without the field's name (the door adds it), for an empty value, a boolean, a number
    that is negative, fractional or above ``MAX_VOICE``, or a name that is too long."""
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    text = str(value).strip() if value is not None else ""
    if not text:
        raise ValueError("no speaker is given")
    if isinstance(value, bool) or len(text) > MAX_VOICE_CHARS or isinstance(value, float):
        raise ValueError(f"{text[:40]} is not a speaker")
    if text.lstrip("-").isdigit():
        if not 0 <= int(text) <= MAX_VOICE:
            raise ValueError(f"{text[:40]} is not a speaker number (0 to {MAX_VOICE:,})")
        return int(text)
    return text
