"""A tiny random Orpheus-style text-to-speech model and SNAC codec built offline, for the tests and
benches (the Hub cannot be reached here).

``build_tiny_snac``: a ``snac.SNAC`` of SNAC 24 kHz's layout (24 kHz, encoder rates 2 4 8 8: a hop of
512 samples, 3 levels of 4096 codes at strides 4 2 1, so a frame is 2048 samples) with tiny
widths (encoder 4, decoder 16), saved as ``SNAC.from_pretrained`` reads a folder (config.json,
pytorch_model.bin). ``build_tiny_orpheus``: a ``LlamaForCausalLM`` (hidden 64, 2 layers) with the
bundled model's tokenizer plus Orpheus' ``<custom_token_0>`` .. ``<custom_token_28681>`` (its
specials 1..7 and the 7 x 4096 code tokens from 10), its generation config saying at most
``GENERATED_FRAMES`` frames, greedy. Weights are random: its speech is noise before training.
"""

from __future__ import annotations

import json
from pathlib import Path

SNAC_CONFIG = dict(
    sampling_rate=24000,
    encoder_dim=4,
    encoder_rates=[2, 4, 8, 8],
    decoder_dim=16,
    decoder_rates=[8, 8, 4, 2],
    attn_window_size=None,
    codebook_size=4096,
    codebook_dim=8,
    vq_strides=[4, 2, 1],
    noise=True,
    depthwise=True,
)
SIZES = dict(
    hidden_size=64,
    intermediate_size=128,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=2,
    head_dim=16,
)
CUSTOM_TOKENS = 10 + 7 * 4096  # <custom_token_0> .. <custom_token_28681>
GENERATED_FRAMES = 4  # its generation config's max_new_tokens: 4 frames of 7 tokens (341 ms)


def build_tiny_snac(target: Path, seed: int = 0) -> Path:
    """A random tiny SNAC in ``target`` (built once: an existing ``pytorch_model.bin`` is kept)."""
    if (target / "pytorch_model.bin").is_file():
        return target
    import torch
    from snac import SNAC

    torch.manual_seed(seed)
    codec = SNAC(**SNAC_CONFIG)
    target.mkdir(parents=True, exist_ok=True)
    (target / "config.json").write_text(json.dumps(SNAC_CONFIG), encoding="utf-8")
    torch.save(codec.state_dict(), target / "pytorch_model.bin")
    return target


def build_tiny_orpheus(tokenizer_dir: Path, target: Path, seed: int = 0) -> Path:
    """A random tiny Orpheus-style Llama in ``target`` with the tokenizer of ``tokenizer_dir`` and
    Orpheus' custom tokens (built once: an existing ``model.safetensors`` is kept)."""
    if (target / "model.safetensors").is_file():
        return target
    import torch
    from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM

    tokenizer = AutoTokenizer.from_pretrained(tokenizer_dir)
    tokenizer.add_tokens([f"<custom_token_{n}>" for n in range(CUSTOM_TOKENS)])
    config = LlamaConfig(
        **SIZES,
        vocab_size=len(tokenizer),
        max_position_embeddings=2048,
        tie_word_embeddings=True,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
    )
    torch.manual_seed(seed)
    model = LlamaForCausalLM(config)
    model.generation_config.max_new_tokens = 7 * GENERATED_FRAMES
    model.generation_config.do_sample = False
    model.save_pretrained(target)
    tokenizer.save_pretrained(target)
    return target


if __name__ == "__main__":  # build by hand: python -m bench.orpheus_model TOKENIZER_FOLDER FOLDER
    import sys

    folder = Path(sys.argv[2])
    print(build_tiny_orpheus(Path(sys.argv[1]), folder / "orpheus-tiny"), build_tiny_snac(folder / "snac-tiny"))
