"""Tiny random models for the engine tests: the real SmolLM2 architecture and tokenizer, shrunk.

A tiny model keeps everything about the default model that the engine reads (``LlamaForCausalLM``,
the 49,152-token vocabulary, the ChatML template, ``<|im_end|>`` as eos and pad, tied embeddings)
and changes only the sizes: hidden 64, 2 layers, 4 attention heads (2 key/value heads), MLP 128.
That is 3.2 M parameters (the embedding is 3.1 M of them), 13 MB on disk, and a training step of
a few milliseconds, against 135 M parameters and about a second a step for the real model.

Its weights are random (``torch.manual_seed(0)``), so its outputs mean nothing: tests that look at
what a model says or learns use the real model (``model_dir``, marked ``real_model``).
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path

TINY_SIZES = {
    "hidden_size": 64,
    "intermediate_size": 128,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "head_dim": 16,
}
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "chat_template.jinja", "generation_config.json")


def build_tiny_model(real_model_dir: Path, target: Path, seed: int = 0) -> Path:
    """Write a tiny random copy of the model in ``real_model_dir`` (a transformers folder of a
    decoder-only model: its ``config.json`` with ``TINY_SIZES`` applied, its tokenizer, chat
    template and generation config) to ``target`` and return it. The same ``seed`` gives the same
    weights. Written beside ``target`` and renamed into place, so concurrent builders (pytest-xdist
    workers) never see half a folder; an existing complete ``target`` is returned as it is."""
    if (target / "model.safetensors").is_file():
        return target
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    config = AutoConfig.from_pretrained(real_model_dir)
    for name, value in TINY_SIZES.items():
        setattr(config, name, value)
    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    return save_with_tokenizer(model, real_model_dir, target)


def save_with_tokenizer(model, tokenizer_dir: Path, target: Path) -> Path:
    """Save ``model`` and the tokenizer files of ``tokenizer_dir`` to ``target``: written beside it
    and renamed into place, so concurrent builders (pytest-xdist workers) never see half a folder.
    Returns ``target``."""
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{target.name}-", dir=target.parent))
    try:
        model.save_pretrained(staging)
        for name in TOKENIZER_FILES:
            if (tokenizer_dir / name).is_file():
                shutil.copy2(tokenizer_dir / name, staging / name)
        os.replace(staging, target)
    except OSError:
        if not (target / "config.json").is_file():  # lost a race only if the winner finished
            raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return target


def tiny_sizes(model_dir: Path) -> dict[str, int]:
    """The sizes ``TINY_SIZES`` names, as ``model_dir``'s config.json records them."""
    config = json.loads((Path(model_dir) / "config.json").read_text(encoding="utf-8"))
    return {name: config[name] for name in TINY_SIZES}
