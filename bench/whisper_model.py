"""A tiny random Whisper built offline, for the speech-to-text tests and benches (the Hub cannot be
reached here).

``build_tiny_whisper``: ``WhisperForConditionalGeneration`` (d_model 64, 2 encoder + 2 decoder
layers, 80 mel bins) with a ``WhisperProcessor`` made here: the feature extractor from its class
defaults (16 kHz, 80 mel bins) but 8 s windows (``CHUNK_SECONDS``; Whisper's are 30 s) and a byte-level BPE tokenizer trained on the shared
datasets' text (``tokenizers``) carrying Whisper's special tokens (``<|endoftext|>``,
``<|startoftranscript|>``, a few language tokens, ``<|translate|>``, ``<|transcribe|>``,
``<|notimestamps|>``), and a generation config that knows them, so ``generate(language=...,
task=...)`` works. Weights are random: its transcripts are noise before training.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Optional

SHARED = Path(__file__).resolve().parents[1].parent / "shared" / "datasets"
CLIPS = SHARED / "mllm_demo_data"  # the demo clips: mp3 / wav / flac; 16, 44.1 and 48 kHz; mono and stereo; 2.9-5.9 s
TRANSCRIPTS = (  # (clip, its transcript) as speech-to-text rows: the tests' and bench.speech's data
    ("1.mp3", "It is the sound of glass shattering."),
    ("2.wav", "A woman is coughing."),
    ("3.flac", "The wind is blowing through the trees."),
    ("4.mp3", "Someone is playing a piano."),
)
LANGUAGES = ("en", "zh", "de", "es", "ru", "ko", "fr")  # the first of Whisper's language tokens, in its order
SPECIALS = (
    "<|endoftext|>",
    "<|startoftranscript|>",
    *(f"<|{code}|>" for code in LANGUAGES),
    "<|translate|>",
    "<|transcribe|>",
    "<|startoflm|>",
    "<|startofprev|>",
    "<|nospeech|>",
    "<|notimestamps|>",
)
CHUNK_SECONDS = 8  # the window it hears (Whisper's: 30 s): the shared clips are 2.9-5.9 s, a step costs 1/4
GENERATED_TOKENS = 8  # its generation config's max_length: random weights rarely say eos, tests stay quick
TINY_WHISPER = dict(
    d_model=64,
    encoder_layers=2,
    decoder_layers=2,
    encoder_attention_heads=4,
    decoder_attention_heads=4,
    encoder_ffn_dim=128,
    decoder_ffn_dim=128,
    num_mel_bins=80,
    max_source_positions=400,  # CHUNK_SECONDS of 10 ms frames, halved by the encoder's stride-2 conv
    max_target_positions=128,
)
WHISPER_TINY_SIZE = dict(  # openai/whisper-tiny's shape (39 M parameters), for the estimates' bench: 30 s windows
    d_model=384,
    encoder_layers=4,
    decoder_layers=4,
    encoder_attention_heads=6,
    decoder_attention_heads=6,
    encoder_ffn_dim=1536,
    decoder_ffn_dim=1536,
    num_mel_bins=80,
    max_source_positions=1500,
    max_target_positions=448,
    vocab_size=51865,  # beyond the tokenizer's ids: rows never reach them, the LM head still scores them
)


def _corpus() -> Iterator[str]:
    """Text to train the BPE vocabulary on: the Alpaca demo's instructions and outputs."""
    for row in json.loads((SHARED / "alpaca_en_demo.json").read_text(encoding="utf-8")):
        yield row["instruction"] + " " + row.get("input", "") + " " + row["output"]


def _tokenizer(target: Path, vocab_size: int = 1000) -> None:
    """A byte-level BPE (as Whisper's GPT-2-style vocabulary) trained on ``_corpus`` with Whisper's
    special tokens, saved in ``target`` as a ``WhisperTokenizer`` (vocab.json + merges.txt)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import WhisperTokenizer

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), special_tokens=[]
    )
    tok.train_from_iterator(_corpus(), trainer)
    raw = json.loads(tok.to_str())["model"]
    target.mkdir(parents=True, exist_ok=True)
    vocab = dict(raw["vocab"])
    for special in SPECIALS:  # after the BPE tokens, in Whisper's order
        vocab[special] = len(vocab)
    (target / "vocab.json").write_text(json.dumps(vocab, ensure_ascii=False), encoding="utf-8")
    merges = [" ".join(m) if isinstance(m, list) else m for m in raw["merges"]]
    (target / "merges.txt").write_text("#version: 0.2\n" + "\n".join(merges) + "\n", encoding="utf-8")
    tokenizer = WhisperTokenizer(
        str(target / "vocab.json"),
        str(target / "merges.txt"),
        unk_token="<|endoftext|>",
        bos_token="<|endoftext|>",
        eos_token="<|endoftext|>",
        pad_token="<|endoftext|>",
        model_max_length=TINY_WHISPER["max_target_positions"],
    )
    tokenizer.add_special_tokens({"additional_special_tokens": list(SPECIALS[1:])})
    tokenizer.save_pretrained(target)


def speech_file(folder: Path, rows: tuple = TRANSCRIPTS, name: str = "speech.json", column: str = "text") -> Path:
    """``folder/name``: a JSON list of ``{"audio": <clip file>, <column>: <transcript>}`` for
    ``rows`` (clips of ``CLIPS``), with the clips copied into ``folder`` (a path relative to the
    data file, as users bring them). Returns the JSON file's path."""
    folder.mkdir(parents=True, exist_ok=True)
    for clip, _ in rows:
        if (CLIPS / clip).is_file() and not (folder / clip).exists():
            shutil.copy(CLIPS / clip, folder / clip)
    path = folder / name
    path.write_text(json.dumps([{"audio": clip, column: text} for clip, text in rows]), encoding="utf-8")
    return path


def build_tiny_whisper(
    target: Path, seed: int = 0, shape: Optional[dict] = None, chunk_seconds: int = CHUNK_SECONDS
) -> Path:
    """A random Whisper with its processor in ``target`` (built once: an existing ``config.json`` is
    kept): ``TINY_WHISPER``'s shape and ``CHUNK_SECONDS`` windows unless ``shape`` (e.g.
    ``WHISPER_TINY_SIZE``, with 30 s windows) and ``chunk_seconds`` say otherwise. Returns ``target``."""
    if (target / "config.json").is_file():
        return target
    import torch
    from transformers import (
        GenerationConfig,
        WhisperConfig,
        WhisperFeatureExtractor,
        WhisperForConditionalGeneration,
        WhisperProcessor,
        WhisperTokenizer,
    )

    _tokenizer(target)
    tokenizer = WhisperTokenizer.from_pretrained(target)
    ids = {special: tokenizer.convert_tokens_to_ids(special) for special in SPECIALS}
    eos, start = ids["<|endoftext|>"], ids["<|startoftranscript|>"]
    config = WhisperConfig(
        **{
            "vocab_size": len(tokenizer),
            "bos_token_id": eos,
            "eos_token_id": eos,
            "pad_token_id": eos,
            "decoder_start_token_id": start,
            "suppress_tokens": [],
            "begin_suppress_tokens": [],
            **(shape or TINY_WHISPER),
        }
    )
    torch.manual_seed(seed)
    model = WhisperForConditionalGeneration(config)
    model.generation_config = GenerationConfig(
        decoder_start_token_id=start,
        eos_token_id=eos,
        pad_token_id=eos,
        bos_token_id=eos,
        max_length=GENERATED_TOKENS,
        lang_to_id={f"<|{code}|>": ids[f"<|{code}|>"] for code in LANGUAGES},
        task_to_id={"transcribe": ids["<|transcribe|>"], "translate": ids["<|translate|>"]},
        no_timestamps_token_id=ids["<|notimestamps|>"],
        is_multilingual=True,
        forced_decoder_ids=None,
        suppress_tokens=[],
        begin_suppress_tokens=[],
    )
    model.save_pretrained(target)
    WhisperProcessor(
        feature_extractor=WhisperFeatureExtractor(chunk_length=chunk_seconds), tokenizer=tokenizer
    ).save_pretrained(target)
    return target


if __name__ == "__main__":  # build one by hand: python -m bench.whisper_model FOLDER
    import sys

    print(build_tiny_whisper(Path(sys.argv[1])))
