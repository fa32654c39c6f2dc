"""A voice is a speaker number or a name; the API and the Chat tab read this one rule."""

from __future__ import annotations

import pytest

from trainer_core.serving.voices import MAX_VOICE, MAX_VOICE_CHARS, speaker


def test_numbers_and_names_are_speakers_and_the_rest_is_refused():
    assert speaker("0") == 0 and speaker(3) == 3 and speaker(2.0) == 2 and speaker(" 7 ") == 7
    assert speaker(" tara ") == "tara" and speaker("x" * MAX_VOICE_CHARS) == "x" * MAX_VOICE_CHARS
    refused = {
        "": "no speaker is given",
        None: "no speaker is given",
        "-1": "-1 is not a speaker number",
        str(MAX_VOICE + 1): "is not a speaker number",
        1.5: "1.5 is not a speaker",
        True: "True is not a speaker",
        "x" * (MAX_VOICE_CHARS + 1): "is not a speaker",
    }
    for value, message in refused.items():
        with pytest.raises(ValueError, match=message):
            speaker(value)
