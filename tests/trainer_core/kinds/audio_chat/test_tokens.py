"""The check counts an audio chat run's clips: each clip adds the audio tokens the model's processor
expands it into (``kinds.audio_chat.tokens``: its tokens per second of audio, measured on the
processor), to the report's token totals and to what the memory and time estimates are given."""

from __future__ import annotations

import json

import pytest

from trainer_core.data.audio import read_audio
from trainer_core.data.preview_tokenizer import load_preview_tokenizer
from trainer_core.kinds.audio_chat.processor import load_processor
from trainer_core.kinds.audio_chat.tokens import processor_rate
from trainer_core.preflight import estimates
from trainer_core.preflight.check import run_preflight
from trainer_core.preflight.gather import gather
from trainer_core.schemas import TrainingStartRequest
from trainer_core.settings import get_settings


@pytest.fixture
def settings(monkeypatch, datasets_dir, tiny_audio_chat_dir):
    monkeypatch.setenv("STUDIO_ALLOWED_PATHS", f"{datasets_dir}:{tiny_audio_chat_dir.parent}")
    get_settings.cache_clear()
    yield get_settings()
    get_settings.cache_clear()


def processor_audio_tokens(processor, demo) -> int:
    """``<|AUDIO|>`` tokens the processor itself makes of every clip of the demo file."""
    rate, total = processor.feature_extractor.sampling_rate, 0
    for row in json.loads(demo.read_text()):
        for clip in row["audios"]:
            audio = read_audio(str(demo.parent / clip), sampling_rate=rate)
            ids = processor(text=["<|AUDIO|>"], audio=[audio], sampling_rate=rate)["input_ids"][0]
            total += ids.count(processor.audio_token_id)
    return total


def test_the_check_counts_each_clip_as_the_audio_tokens_the_processor_makes(
    settings, datasets_dir, tiny_audio_chat_dir, monkeypatch
):
    demo = datasets_dir / "mllm_audio_demo.json"
    request = TrainingStartRequest(model_name=str(tiny_audio_chat_dir), local_datasets=[str(demo)])
    given, real_time = {}, estimates.estimate_time

    def estimate_time(request, config, train_tokens_per_epoch, *args, **kwargs):
        given["time"] = train_tokens_per_epoch
        return real_time(request, config, train_tokens_per_epoch, *args, **kwargs)

    monkeypatch.setattr(estimates, "estimate_time", estimate_time)
    report = run_preflight(request, settings)
    text = gather(request, load_preview_tokenizer(request.model_name, settings)).train_counts
    text_tokens = int(text.cut[text.kept].sum())
    audio_tokens = processor_audio_tokens(load_processor(tiny_audio_chat_dir), demo)
    assert audio_tokens == 320  # 12.8 s of audio in 3 clips, 25 tokens a second
    assert report.tokens_total == text_tokens + audio_tokens and not report.errors
    assert report.tokens_trained == int(text.trained[text.kept].sum())  # audio tokens are never scored
    assert given["time"] == report.tokens_total  # the time estimate is given the clips' tokens too
    assert report.memory_estimate_gib is not None and f"include {audio_tokens} audio tokens" in report.vision


def test_the_rate_is_measured_on_the_processor(tiny_audio_chat_dir):
    rate = processor_rate(load_processor(tiny_audio_chat_dir))
    assert (rate.tokens_per_second, rate.window_tokens, rate.window_seconds) == (25.0, 750, 30.0)
    assert rate.clip_tokens(2.9) == 72 and rate.clip_tokens(45.0) == 750  # beyond the window: not heard
