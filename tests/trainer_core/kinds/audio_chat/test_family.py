"""An audio-in chat model's family from its saved folder."""

from __future__ import annotations

from trainer_core.kinds.audio_chat.family import AudioChatFamily, folder_family


def test_the_family_of_a_saved_folder(tiny_audio_chat_dir, tiny_model_dir, tmp_path):
    assert folder_family(tiny_audio_chat_dir) == AudioChatFamily("qwen2_audio", "Qwen2-Audio")
    assert folder_family(tiny_model_dir) is None and folder_family(tmp_path) is None and folder_family(None) is None
