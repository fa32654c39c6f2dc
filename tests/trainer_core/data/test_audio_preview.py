"""The dataset preview's audio (``data.audio_preview`` through ``inspect.inspect_dataset``): for a
model that reads audio, a player of each clip of the first rows with its duration, and a line on
all the clips and ``is_dataset_audio``; the switch and the length limit refused there as at Check."""

from __future__ import annotations

import base64
import io
import re
from pathlib import Path

import pytest
import soundfile

from tests.support.audio_kinds import AUDIO_CHAT, registered
from trainer_core.data.audio_preview import PREVIEW_RATE, duration_text
from trainer_core.data.errors import DatasetError
from trainer_core.data.inspect import inspect_dataset

PLAYER = re.compile(
    r'<audio controls preload="none" src="data:audio/mpeg;base64,([A-Za-z0-9+/=]+)"></audio> (\S+) \((.+?)\)'
)


def test_the_demo_gets_a_player_and_a_duration_per_clip(datasets_dir: Path) -> None:
    with registered(AUDIO_CHAT):
        found = inspect_dataset(str(datasets_dir / "mllm_audio_demo.json"), kind=AUDIO_CHAT)
    assert list(found.sample.columns) == ["row", "conversation", "audio"] and found.rows_total == 3
    cells = [PLAYER.fullmatch(cell) for cell in found.sample["audio"]]
    names = [m.group(2).replace("\\", "") for m in cells]  # Markdown-escaped as the table's text is ("1\\.mp3")
    assert names == ["1.mp3", "2.wav", "3.flac"] and [m.group(3) for m in cells] == ["4.0 s", "2.9 s", "5.9 s"]
    for match, seconds in zip(cells, (4.032, 2.901, 5.855)):
        played = soundfile.info(io.BytesIO(base64.b64decode(match.group(1))))
        assert played.samplerate == PREVIEW_RATE and played.channels == 1
        assert played.duration == pytest.approx(seconds, abs=0.1)  # MP3 frames pad the end a little
        assert len(match.group(1)) < 10_000 * seconds  # about 6 KB of MP3 a second, 8 KB in base64
    assert found.notes[-1] == (
        "Audio: 3 clips in the first 3 rows, 12.8 s in all, longest 5.9 s (row 3, 3.flac); "
        "is_dataset_audio: found from the data (yes)"
    )
    assert "&lt;audio&gt;What's that sound?" not in found.sample["conversation"][0]  # markers escaped, shown as text
    assert found.sample["conversation"][0].startswith("**user:** \\<audio\\>What's that sound?")


def test_the_preview_refuses_as_the_check_does(datasets_dir: Path) -> None:
    demo = str(datasets_dir / "mllm_audio_demo.json")
    with registered(AUDIO_CHAT):
        with pytest.raises(DatasetError, match=r"row 3 \(3.flac, 5.9 s\)") as long:
            inspect_dataset(demo, kind=AUDIO_CHAT, max_audio_seconds=5.0)
        with pytest.raises(DatasetError, match="is_dataset_audio: it is off, but the data holds audio clips"):
            inspect_dataset(demo, kind=AUDIO_CHAT, is_dataset_audio=False)
    assert long.value.fields == ("max_audio_seconds",)
    assert (duration_text(4.04), duration_text(65.25)) == ("4.0 s", "1:05.2")
