"""Chat with an audio-in model: a conversation's clips (data: URLs) made into its inputs as
training made its rows; images, too many markers and a clip that is not audio refused."""

from __future__ import annotations

import base64
from pathlib import Path

import pytest

from trainer_core.kinds.audio_chat.kind import AUDIO_CHAT
from trainer_core.kinds.audio_chat.processor import load_processor
from trainer_core.kinds.audio_chat.prompt import audio_chat_inputs
from trainer_core.serving.errors import ChatInputError
from trainer_core.serving.schemas import ChatMessage


def wav_url(datasets_dir: Path) -> str:
    return (
        "data:audio/wav;base64," + base64.b64encode((datasets_dir / "mllm_demo_data" / "2.wav").read_bytes()).decode()
    )


def test_a_clip_in_a_user_turn_becomes_the_models_features(tiny_audio_chat_dir, datasets_dir):
    processor = load_processor(tiny_audio_chat_dir)
    message = ChatMessage(role="user", content="What can you hear?", audios=[wav_url(datasets_dir)])
    inputs = AUDIO_CHAT.chat_inputs(processor, [message.model_dump()], "cpu")
    assert inputs["input_features"].shape == (1, 128, 3000)
    assert int((inputs["input_ids"] == processor.audio_token_id).sum()) == 73  # 2.9 s at 25 tokens a second
    text = processor.tokenizer.decode(inputs["input_ids"][0])
    assert text.endswith("<|audio_eos|>\nWhat can you hear?<|im_end|>\n<|im_start|>assistant\n")


@pytest.mark.parametrize(
    ("message", "words"),
    [
        ({"role": "user", "content": "<audio><audio>Both?", "audios": ["wav"]}, "2 <audio> marker(s) and 1 audio clip"),
        ({"role": "user", "content": "Hi", "images": ["data:image/png;base64,AAAA"]}, "holds images"),
        ({"role": "user", "content": "Hi", "audios": ["data:audio/wav;base64,bm90IGF1ZGlv"]}, "messages: "),
    ],
    ids=["markers", "image", "not-audio"],
)
def test_bad_chat_audio_is_refused_naming_the_messages(tiny_audio_chat_dir, datasets_dir, message, words):
    message = {**message, "audios": [wav_url(datasets_dir) if a == "wav" else a for a in message.get("audios", [])]}
    with pytest.raises(ChatInputError, match=words.replace("(", r"\(").replace(")", r"\)")) as refused:
        audio_chat_inputs(load_processor(tiny_audio_chat_dir), [message], "cpu")
    assert refused.value.fields == ("messages",)


def test_a_chat_message_takes_only_audio_data_urls():
    with pytest.raises(ValueError, match="data:audio/"):
        ChatMessage(role="user", content="Hi", audios=["/etc/passwd"])
