"""The batches an audio chat model trains on: the processor's own collation (padded on the right,
the clips' log-mel features), answers scored and audio tokens never; clips over the limit refused."""

from __future__ import annotations

from pathlib import Path

import pytest

from trainer_core.data.errors import RowError
from trainer_core.data.files import read_file
from trainer_core.data.tokenization import IGNORE
from trainer_core.kinds.audio_chat.collator import AudioChatCollator, audio_token_ids
from trainer_core.kinds.audio_chat.processor import load_processor
from trainer_core.kinds.audio_chat.rows import normalize_audio_chat
from trainer_core.vocabulary import FormatType


@pytest.fixture(scope="module")
def demo_rows(datasets_dir: Path):
    path = datasets_dir / "mllm_audio_demo.json"
    return normalize_audio_chat(read_file(str(path)), FormatType.auto, path.name, path.parent, [])[0]


def test_the_scored_tokens_are_the_answers_and_never_an_audio_token(tiny_audio_chat_dir, demo_rows):
    processor = load_processor(tiny_audio_chat_dir)
    collator = AudioChatCollator(processor, 4096, True, max_seconds=30)
    batch = collator([demo_rows[0], demo_rows[2]])
    assert batch["input_features"].shape == (2, 128, 3000)  # 30 s windows of 128 mel bins
    audio = audio_token_ids(processor)
    assert {
        processor.tokenizer.convert_tokens_to_ids(t) for t in ("<|AUDIO|>", "<|audio_bos|>", "<|audio_eos|>")
    } == audio
    for i, row in enumerate((demo_rows[0], demo_rows[2])):
        ids, labels = batch["input_ids"][i], batch["labels"][i]
        scored = ids[labels != IGNORE].tolist()
        assert not set(scored) & audio
        assert processor.tokenizer.decode(scored) == row["messages"][1]["content"] + "<|im_end|>"
        assert (labels[labels != IGNORE] == ids[labels != IGNORE]).all()
    # one <|AUDIO|> per 40 ms of the clip: 4.03 s and 5.86 s
    assert (batch["input_ids"] == processor.audio_token_id).sum(dim=1).tolist() == [101, 146]
    assert batch["attention_mask"][0, -1] == 0 and batch["labels"][0, -1] == IGNORE  # row 0 padded on the right


def test_a_clip_over_max_audio_seconds_is_refused(tiny_audio_chat_dir, demo_rows):
    collator = AudioChatCollator(load_processor(tiny_audio_chat_dir), 4096, True, max_seconds=3)
    with pytest.raises(RowError):
        collator([demo_rows[0]])  # 4.03 s
    assert collator([demo_rows[1]])["input_features"].shape[0] == 1  # 2.9 s
