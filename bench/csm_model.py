"""A tiny random Sesame CSM built offline, for the text-to-speech tests and benches (the Hub cannot
be reached here).

``build_tiny_csm``: ``CsmForConditionalGeneration`` (backbone hidden 64, 2 layers; depth decoder
hidden 32, 2 layers; 4 codebooks of 32 codes) with a tiny Mimi codec (hidden 32, 1 transformer
layer, 4 quantizers, Mimi's own strides: 24 kHz audio, 12.5 frames a second, so the processor's
default ``encoded_length_kwargs`` count its frames) and a ``CsmProcessor`` made here: Mimi's
``EncodecFeatureExtractor`` (24 kHz mono) and a byte-level BPE trained on the shared datasets' text
(``tokenizers``) carrying CSM's special tokens (``<|begin_of_text|>``, ``<|end_of_text|>``,
``<|AUDIO|>``, ``<|audio_eos|>``) and a chat template of CSM's shape: each turn
``<|begin_of_text|>[speaker]text<|end_of_text|>`` followed by ``<|AUDIO|><|audio_eos|>`` where it
has audio. Its generation config stops after ``GENERATED_FRAMES`` frames: random weights rarely say
the codec's end frame; the heads' weights for the 3 codes past the codebook are zero, so greedy
decoding picks real codes the codec can decode. Weights are random: its speech is noise before
training.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

SHARED = Path(__file__).resolve().parents[1].parent / "shared" / "datasets"
SPECIALS = ("<|begin_of_text|>", "<|end_of_text|>", "<|AUDIO|>", "<|audio_eos|>", "<|pad|>")
CODEBOOKS = 4  # Mimi's quantizers = CSM's codebooks (the real model: 32)
CODEBOOK_SIZE = 32  # codes per codebook (the real model: 2048); CSM's vocabulary adds 3 (eos 0, pad last)
GENERATED_FRAMES = 6  # its generation config's max_new_tokens: 6 frames of 80 ms
TEMPLATE = (
    "{%- for message in messages -%}"
    "{{- bos_token + '[' + message['role'] + ']' -}}"
    "{%- for part in message['content'] if part['type'] == 'text' -%}{{- part['text'] -}}{%- endfor -%}"
    "{{- eos_token -}}"
    "{%- if message['content'] | selectattr('type', 'equalto', 'audio') | list | length -%}"
    "{{- '<|AUDIO|><|audio_eos|>' -}}"
    "{%- endif -%}"
    "{%- endfor -%}"
)
# (clip, text) rows of the text-to-speech tests and bench: the demo's wav (2.9 s) and flac (5.9 s), 24 kHz once resampled
ROWS = (("2.wav", "A woman is coughing."), ("3.flac", "The wind is blowing through the trees."))
TINY_MIMI = dict(
    hidden_size=32,
    num_filters=4,
    num_residual_layers=1,
    upsample_groups=32,
    num_hidden_layers=1,
    num_attention_heads=2,
    num_key_value_heads=2,
    head_dim=16,
    intermediate_size=64,
    codebook_size=CODEBOOK_SIZE,
    codebook_dim=16,
    vector_quantization_hidden_dimension=16,
    num_quantizers=CODEBOOKS,
    num_semantic_quantizers=1,
)


def tts_file(folder: Path, speakers: tuple = (0, 1), name: str = "tts.json", rows: tuple = ROWS) -> Path:
    """``folder/name``: ``rows`` (clip, text) as ``{"audio", "text", "speaker"}`` (``speakers`` in
    turn), the clips copied beside it (``whisper_model.speech_file``). Returns the JSON file's path."""
    from bench.whisper_model import speech_file

    path = speech_file(folder, rows, name)
    found = json.loads(path.read_text(encoding="utf-8"))
    for row, speaker in zip(found, speakers):
        row["speaker"] = speaker
    path.write_text(json.dumps(found), encoding="utf-8")
    return path


def _corpus() -> Iterator[str]:
    """Text to train the BPE vocabulary on: the Alpaca demo's instructions and outputs."""
    for row in json.loads((SHARED / "alpaca_en_demo.json").read_text(encoding="utf-8")):
        yield row["instruction"] + " " + row["output"]


def _tokenizer(vocab_size: int = 1000):
    """A byte-level BPE ``PreTrainedTokenizerFast`` trained on ``_corpus`` with ``SPECIALS``."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), special_tokens=list(SPECIALS)
    )
    tok.train_from_iterator(_corpus(), trainer)
    return PreTrainedTokenizerFast(
        tokenizer_object=tok,
        bos_token="<|begin_of_text|>",
        eos_token="<|end_of_text|>",
        pad_token="<|pad|>",
        padding_side="left",
        chat_template=TEMPLATE,
    )


def _config(tokenizer):
    """``CsmConfig`` of the tiny model for ``tokenizer``'s ids."""
    from transformers import CsmConfig, CsmDepthDecoderConfig, MimiConfig

    vocab = CODEBOOK_SIZE + 3
    depth = CsmDepthDecoderConfig(
        num_codebooks=CODEBOOKS,
        backbone_hidden_size=64,
        vocab_size=vocab,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=1,
        max_position_embeddings=CODEBOOKS + 1,
    )
    ids = tokenizer.convert_tokens_to_ids
    return CsmConfig(
        num_codebooks=CODEBOOKS,
        vocab_size=vocab,
        text_vocab_size=len(tokenizer),
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=1024,
        codebook_pad_token_id=vocab - 1,
        codebook_eos_token_id=0,
        bos_token_id=ids("<|begin_of_text|>"),
        pad_token_id=ids("<|pad|>"),
        audio_token_id=ids("<|AUDIO|>"),
        audio_eos_token_id=ids("<|audio_eos|>"),
        depth_decoder_config=depth.to_dict(),
        codec_config=MimiConfig(**TINY_MIMI).to_dict(),
    )


def build_tiny_csm(target: Path, seed: int = 0) -> Path:
    """A random tiny CSM with its processor in ``target`` (built once: an existing ``config.json``
    is kept). Returns ``target``."""
    if (target / "config.json").is_file():
        return target
    import torch
    from transformers import CsmForConditionalGeneration, CsmProcessor, EncodecFeatureExtractor

    tokenizer = _tokenizer()
    torch.manual_seed(seed)
    model = CsmForConditionalGeneration(_config(tokenizer))
    with torch.no_grad():  # codes past the codebook (its pad) never said: the codec could not decode them
        model.lm_head.weight[CODEBOOK_SIZE:] = 0.0
        model.depth_decoder.codebooks_head.weight[..., CODEBOOK_SIZE:] = 0.0
    model.generation_config.max_new_tokens = GENERATED_FRAMES
    model.generation_config.do_sample = False
    model.depth_decoder.generation_config.min_new_tokens = CODEBOOKS - 1
    model.depth_decoder.generation_config.max_new_tokens = CODEBOOKS - 1
    model.depth_decoder.generation_config.do_sample = False
    model.save_pretrained(target)
    extractor = EncodecFeatureExtractor(feature_size=1, sampling_rate=24000, padding_value=0.0)
    CsmProcessor(feature_extractor=extractor, tokenizer=tokenizer, chat_template=TEMPLATE).save_pretrained(target)
    return target


if __name__ == "__main__":  # build one by hand: python -m bench.csm_model FOLDER
    import sys

    print(build_tiny_csm(Path(sys.argv[1])))
