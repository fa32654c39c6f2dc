"""Audio chat rows made ready for training with the model's processor: each clip read and counted
(``AudioStats``), a clip over ``max_audio_seconds`` refused by row, a ``sampling_rate`` the feature
extractor was not made for refused naming the field."""

from __future__ import annotations

import pytest

from trainer_core.data.errors import DatasetError
from trainer_core.kinds.audio_chat.kind import AUDIO_CHAT
from trainer_core.kinds.audio_chat.prepare import prepare_audio_chat_data
from trainer_core.kinds.audio_chat.processor import load_processor
from trainer_core.schemas import TrainingStartRequest


@pytest.fixture(scope="module")
def processor(tiny_audio_chat_dir):
    return load_processor(tiny_audio_chat_dir)


def request_for(tiny_audio_chat_dir, datasets_dir, **fields) -> TrainingStartRequest:
    return TrainingStartRequest(
        model_name=str(tiny_audio_chat_dir), local_datasets=[str(datasets_dir / "mllm_audio_demo.json")], **fields
    )


def test_the_demo_clips_are_counted_with_their_tokens(processor, tiny_audio_chat_dir, datasets_dir):
    data = prepare_audio_chat_data(request_for(tiny_audio_chat_dir, datasets_dir), processor, AUDIO_CHAT)
    assert data.train.column_names == ["messages", "audios"] and data.stats.rows == 3
    assert data.audio.clips == 3 and [round(s, 2) for s in data.audio.seconds] == [4.03, 2.9, 5.86]
    assert data.audio.tokens == 101 + 73 + 146 + 3 * 2  # one <|AUDIO|> per 40 ms, and each clip's bos and eos
    assert data.audio.line() == "3 clips, 12.8 s in all (2.9 to 5.9 s), 25 tokens per second of audio"
    assert data.stats.trained_tokens == 10 + 6 + 21  # the answers and their <|im_end|>


def test_a_clip_over_max_audio_seconds_is_refused_by_row(processor, tiny_audio_chat_dir, datasets_dir):
    request = request_for(tiny_audio_chat_dir, datasets_dir, max_audio_seconds=3)
    with pytest.raises(DatasetError, match=r"^training data, row 1: "):
        prepare_audio_chat_data(request, processor, AUDIO_CHAT)


def test_a_sampling_rate_the_feature_extractor_was_not_made_for_is_refused(
    processor, tiny_audio_chat_dir, datasets_dir
):
    with pytest.raises(
        DatasetError, match="sampling_rate: 22050 Hz, but this model's feature extractor reads audio at 16000 Hz"
    ) as refused:
        prepare_audio_chat_data(
            request_for(tiny_audio_chat_dir, datasets_dir, sampling_rate=22050), processor, AUDIO_CHAT
        )
    assert refused.value.fields == ("sampling_rate",)
