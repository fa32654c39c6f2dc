"""Whisper's batches: log-mel features of each clip (decoded, resampled, mono) by the processor's
feature extractor; decoder inputs that start with the prompt; labels whose scored tokens decode to
exactly the transcript and its eos (the prompt and the padding never scored); the prompt as the
request's language / task / timestamps ask, and an unknown language refused."""

from __future__ import annotations

import pytest
import torch

from tests.support.speech_data import ROWS, speech_file, speech_request
from trainer_core.kinds.speech_to_text.collator import IGNORE, FeatureCache, SpeechCollator, decoder_prompt
from trainer_core.kinds.speech_to_text.loading import load_processor
from trainer_core.refusals import Refusal


@pytest.fixture(scope="module")
def processor(tiny_whisper_dir):
    return load_processor(tiny_whisper_dir)


def test_scored_tokens_are_exactly_each_transcript_and_its_eos(processor, tiny_whisper_dir, tmp_path):
    data = speech_file(tmp_path)
    request = speech_request(tiny_whisper_dir, data, language="en", task="transcribe")
    collator = SpeechCollator(processor, request, max_length=64)
    rows = [{"audio": str(tmp_path / clip), "text": text} for clip, text in ROWS]
    batch = collator(rows)
    assert batch["input_features"].shape == (4, 80, 800)  # 80 mel bins, the tiny model's 8 s of 10 ms frames
    assert batch["input_features"].dtype == torch.float32
    tokenizer = processor.tokenizer
    prompt = tokenizer.convert_ids_to_tokens(batch["decoder_input_ids"][0, :4].tolist())
    assert prompt == ["<|startoftranscript|>", "<|en|>", "<|transcribe|>", "<|notimestamps|>"]
    for index, (_, text) in enumerate(ROWS):
        labels = batch["labels"][index]
        scored = labels[labels != IGNORE].tolist()
        assert tokenizer.decode(scored) == text + "<|endoftext|>"
        assert labels[:3].tolist() == [IGNORE] * 3  # <|en|> <|transcribe|> <|notimestamps|> are not scored
        # each label is the next decoder input: the model learns to continue its own prompt
        inputs = batch["decoder_input_ids"][index]
        assert inputs[4 : 3 + len(scored)].tolist() == scored[:-1]
    lengths = (batch["labels"] != IGNORE).sum(dim=1)
    assert lengths.min() < lengths.max()  # padded: the shorter rows' tails are -100
    collator.audio = lambda rows: pytest.fail(f"read again: {rows}")  # the next epoch: every clip's features kept
    again = collator(rows[::-1])
    assert torch.equal(again["input_features"], batch["input_features"].flip(0))


def test_the_feature_cache_drops_the_least_recently_used_past_its_budget():
    clip = torch.zeros(2, 8)  # 64 bytes
    cache = FeatureCache(budget=3 * (64 + 1))
    for name in "abc":
        cache.put(name, clip)
    assert cache.get("a") is clip  # now the most recent
    cache.put("d", clip)
    assert list(cache.items) == ["c", "a", "d"] and cache.used == 3 * 65
    cache.put("huge", torch.zeros(100, 8))
    assert "huge" not in cache.items and cache.get("b") is None


def test_the_prompt_follows_language_task_and_timestamps(processor, tiny_whisper_dir, tmp_path):
    tokenizer = processor.tokenizer
    ask = lambda **f: tokenizer.convert_ids_to_tokens(  # noqa: E731
        decoder_prompt(tokenizer, speech_request(tiny_whisper_dir, tmp_path / "x.json", **f))
    )
    assert ask(language="German", task="translate") == [
        "<|startoftranscript|>",
        "<|de|>",
        "<|translate|>",
        "<|notimestamps|>",
    ]
    assert ask(language=None, task="transcribe", return_timestamps=True) == ["<|startoftranscript|>", "<|transcribe|>"]
    with pytest.raises(Refusal) as refused:
        ask(language="klingon", task="transcribe")
    assert refused.value.fields == ("language",)
    with pytest.raises(Refusal) as refused:
        ask(language="ja", task="transcribe")  # Whisper knows it, this tiny vocabulary does not
    assert "<|ja|>" in str(refused.value)


def test_long_transcripts_are_cut_keeping_their_eos(processor, tiny_whisper_dir, tmp_path):
    request = speech_request(tiny_whisper_dir, tmp_path / "x.json", language="en", task="transcribe")
    collator = SpeechCollator(processor, request, max_length=8)
    batch = collator([{"audio": str(speech_file(tmp_path).parent / "2.wav"), "text": ROWS[0][1] * 3}])
    assert batch["decoder_input_ids"].shape == (1, 8)
    scored = batch["labels"][0][batch["labels"][0] != IGNORE].tolist()
    assert len(scored) == 8 - 4 + 1 and scored[-1] == processor.tokenizer.eos_token_id
