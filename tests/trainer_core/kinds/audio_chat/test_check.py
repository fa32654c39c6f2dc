"""The check's line about an audio-in chat model: the kind, the family, the rate and limit clips are
read with, and what the first rows' clips cost in tokens."""

from __future__ import annotations

from trainer_core.kinds.audio_chat.check import audio_chat_summary
from trainer_core.kinds.audio_chat.kind import AUDIO_CHAT
from trainer_core.schemas import TrainingStartRequest
from trainer_core.settings import get_settings


def test_the_line_names_the_kind_and_the_clips(tiny_audio_chat_dir, datasets_dir, tiny_model_dir):
    request = TrainingStartRequest(
        model_name=str(tiny_audio_chat_dir), local_datasets=[str(datasets_dir / "mllm_audio_demo.json")]
    )
    line = audio_chat_summary(request, get_settings(), tiny_audio_chat_dir, AUDIO_CHAT)
    assert line == (
        "audio chat: Qwen2-Audio; padded batches (audio rows are not packed); clips read at 16000 Hz, at most 30 s "
        "each; in the first 3 rows: 3 clips, 12.8 s in all (2.9 to 5.9 s), 25 tokens per second of audio; rows of "
        "113 to 202 tokens with their clips"
    )
    assert audio_chat_summary(request, get_settings(), tiny_model_dir, AUDIO_CHAT) is None  # a text model
