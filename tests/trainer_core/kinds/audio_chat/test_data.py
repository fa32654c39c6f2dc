"""Whether a request's clips are kept: for an audio-in chat model, kept; ``is_dataset_audio`` on for
a model that reads no audio, or off for the audio model, refused naming the field (as the Check
refuses them); a text model's rows with clips refused by file and row naming the audio models to
pick instead."""

from __future__ import annotations

import pytest

from trainer_core.data.errors import DatasetError
from trainer_core.data.files import read_file
from trainer_core.data.prepare import load_conversations
from trainer_core.kinds.audio_chat.data import reads_audio
from trainer_core.kinds.audio_chat.kind import AUDIO_CHAT
from trainer_core.model_kind import way_out
from trainer_core.schemas import TrainingStartRequest
from trainer_core.settings import get_settings


@pytest.fixture
def allowed(monkeypatch, datasets_dir, tiny_audio_chat_dir, tiny_model_dir):
    monkeypatch.setenv("STUDIO_ALLOWED_PATHS", f"{datasets_dir}:{tiny_audio_chat_dir.parent}:{tiny_model_dir.parent}")
    get_settings.cache_clear()
    yield
    get_settings.cache_clear()


def test_an_audio_chat_model_keeps_the_clips_and_the_switches_refuse_by_field_or_row(
    allowed, datasets_dir, tiny_audio_chat_dir, tiny_model_dir
):
    demo = [str(datasets_dir / "mllm_audio_demo.json")]
    rows, _ = load_conversations(TrainingStartRequest(model_name=str(tiny_audio_chat_dir), local_datasets=demo))
    assert rows.column_names == ["messages", "audios"] and len(rows) == 3
    with pytest.raises(DatasetError, match="is_dataset_audio: it is on, but .* reads no audio") as refused:
        load_conversations(
            TrainingStartRequest(model_name=str(tiny_model_dir), local_datasets=demo, is_dataset_audio=True)
        )
    assert refused.value.fields == ("is_dataset_audio", "model_name")
    with pytest.raises(DatasetError, match="is_dataset_audio: it is off, but the data holds audio clips") as off:
        load_conversations(
            TrainingStartRequest(model_name=str(tiny_audio_chat_dir), local_datasets=demo, is_dataset_audio=False)
        )
    assert off.value.fields == ("is_dataset_audio",)  # as the Check says it (data.audio_rows.source_switch)
    for switch in (None, False):
        with pytest.raises(DatasetError) as refused:
            load_conversations(
                TrainingStartRequest(model_name=str(tiny_model_dir), local_datasets=demo, is_dataset_audio=switch)
            )
        message = str(refused.value)
        assert message.startswith("mllm_audio_demo.json, row 1: it holds 1 audio clip (column 'audios')")
        assert message.endswith(f"or {way_out('audio')}") and AUDIO_CHAT.suggestion in message  # models that hear


def test_a_source_without_clips_is_not_kept(allowed, datasets_dir, tiny_audio_chat_dir):
    request = TrainingStartRequest(
        model_name=str(tiny_audio_chat_dir), local_datasets=[str(datasets_dir / "identity.json")]
    )
    assert reads_audio(request, read_file(str(datasets_dir / "identity.json")), AUDIO_CHAT, AUDIO_CHAT) is False
    assert reads_audio(request, read_file(str(datasets_dir / "mllm_audio_demo.json")), AUDIO_CHAT, AUDIO_CHAT) is True
