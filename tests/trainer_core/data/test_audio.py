"""The one audio opener: the shared clips decoded to mono at the asked rate, refusals by clip."""

from __future__ import annotations

import base64
from pathlib import Path

import numpy as np
import pytest

from trainer_core.data.audio import audio_info, input_audio_url, read_audio, resolve_audio, wav_bytes
from trainer_core.data.errors import RowError

CLIPS = Path(__file__).resolve().parents[4] / "shared" / "datasets" / "mllm_demo_data"


@pytest.mark.parametrize(
    ("name", "rate", "channels", "seconds"),
    [("1.mp3", 48000, 2, 4.03), ("2.wav", 16000, 1, 2.90), ("3.flac", 16000, 1, 5.86), ("4.mp3", 44100, 2, 5.0)],
)
def test_shared_clips_read_mono_at_the_asked_rate(name, rate, channels, seconds):
    reference = resolve_audio(name, CLIPS, [])
    info = audio_info(reference)
    assert (info.sampling_rate, info.channels) == (rate, channels)
    assert info.seconds == pytest.approx(seconds, abs=0.02)
    samples = read_audio(reference, 16000)
    assert samples.dtype == np.float32 and samples.ndim == 1
    assert len(samples) == pytest.approx(16000 * info.seconds, abs=16)  # resampled, length kept
    assert 0.001 < float(np.abs(samples).max()) <= 1.0


def test_data_url_and_hub_bytes_read_as_the_file(tmp_path):
    raw = (CLIPS / "2.wav").read_bytes()
    from_file = read_audio(resolve_audio("2.wav", CLIPS, []), 16000)
    as_url = input_audio_url(
        {"type": "input_audio", "input_audio": {"data": base64.b64encode(raw).decode(), "format": "wav"}}
    )
    hub = resolve_audio({"bytes": raw, "path": "2.wav"}, None, [])
    assert hub.startswith("data:audio/")
    np.testing.assert_array_equal(read_audio(as_url, 16000), from_file)
    np.testing.assert_array_equal(read_audio(hub, 16000), from_file)
    written = tmp_path / "again.wav"
    written.write_bytes(wav_bytes(from_file, 16000))
    assert np.abs(read_audio(str(written), 16000) - from_file).max() < 1e-3  # 16-bit round trip


def test_refusals_name_the_clip(tmp_path):
    (tmp_path / "notes.wav").write_text("not audio at all")
    with pytest.raises(RowError, match=r"notes\.wav cannot be read as audio"):
        read_audio(resolve_audio("notes.wav", tmp_path, []), 16000)
    with pytest.raises(RowError, match=r"3\.flac is 5\.9 s long, more than the longest clip of 5 s"):
        read_audio(resolve_audio("3.flac", CLIPS, []), 16000, max_seconds=5)
    with pytest.raises(RowError, match="missing.wav was not found"):
        resolve_audio("missing.wav", tmp_path, [])
    with pytest.raises(RowError, match="outside the allowed folders"):
        resolve_audio(str(CLIPS / "2.wav"), tmp_path, [])
    with pytest.raises(RowError, match="remote URL"):
        resolve_audio("https://example.com/a.wav", tmp_path, [])
    text_url = "data:audio/wav;base64," + base64.b64encode(b"hello, I am text").decode()
    with pytest.raises(RowError, match=r"\(data: URL\) cannot be read as audio"):
        read_audio(text_url, 16000)
    with pytest.raises(RowError, match="not valid base64"):
        read_audio("data:audio/wav;base64,@@@", 16000)
    with pytest.raises(RowError, match="format 'exe' is not one read here"):
        input_audio_url({"input_audio": {"data": "AAAA", "format": "exe"}})
