"""Random Qwen2-VL models built offline from their transformers config, for the vision tests and
``bench.vision`` (the Hub cannot be reached here, and no Qwen2-VL checkpoint ships with the studio).

Each has Qwen2-VL's architecture (3-D rotary embedding, a ViT with 14-pixel patches merged 2 x 2,
the merger MLP), the bundled SmolLM2 tokenizer plus Qwen2-VL's vision tokens (``<|vision_start|>``,
``<|vision_end|>``, ``<|image_pad|>``, ``<|video_pad|>``) and Qwen2-VL's own chat template.
``TINY`` (tests): hidden 64, 2 language layers, a 3-block tower, images capped at 16 merged patches
(4-16 tokens an image). ``SMALL`` (the benchmark): SmolLM2-135M's language sizes (hidden 576, 30
layers, 9 / 3 heads) with a 4-block tower of width 256 and images up to 64 merged patches, so a step
costs what a small real model's does. Weights are random: outputs mean nothing.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path
from typing import Optional

VISION_TOKENS = ["<|vision_start|>", "<|vision_end|>", "<|image_pad|>", "<|video_pad|>"]
# Qwen2-VL-2B-Instruct's chat_template.json, as published.
QWEN2_VL_TEMPLATE = (
    "{% set image_count = namespace(value=0) %}{% set video_count = namespace(value=0) %}{% for message in messages %}"
    "{% if loop.first and message['role'] != 'system' %}<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n"
    "{% endif %}<|im_start|>{{ message['role'] }}\n{% if message['content'] is string %}{{ message['content'] }}"
    "<|im_end|>\n{% else %}{% for content in message['content'] %}{% if content['type'] == 'image' or 'image' in "
    "content or 'image_url' in content %}{% set image_count.value = image_count.value + 1 %}{% if add_vision_id %}"
    "Picture {{ image_count.value }}: {% endif %}<|vision_start|><|image_pad|><|vision_end|>{% elif content['type'] "
    "== 'video' or 'video' in content %}{% set video_count.value = video_count.value + 1 %}{% if add_vision_id %}"
    "Video {{ video_count.value }}: {% endif %}<|vision_start|><|video_pad|><|vision_end|>{% elif 'text' in content "
    "%}{{ content['text'] }}{% endif %}{% endfor %}<|im_end|>\n{% endif %}{% endfor %}{% if add_generation_prompt %}"
    "<|im_start|>assistant\n{% endif %}"
)


TINY = dict(
    text=dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2),
    vision=dict(depth=3, embed_dim=32, num_heads=2),  # 3 blocks at least: llama.cpp maps merger.mlp.2 by block id
    max_patches=16,
)
SMALL = dict(
    text=dict(
        hidden_size=576, intermediate_size=1536, num_hidden_layers=30, num_attention_heads=9, num_key_value_heads=3
    ),
    vision=dict(depth=4, embed_dim=256, num_heads=4),
    max_patches=64,
)


def _mrope(text: dict) -> list[int]:
    """Qwen2-VL's split of each head's rotary pairs over time, height and width (1 : 1.5 : 1.5, as
    the released models' 16 / 24 / 24 of 64 pairs)."""
    half = text["hidden_size"] // text["num_attention_heads"] // 2
    return [half // 4, 3 * half // 8, half - half // 4 - 3 * half // 8]


def build_tiny_qwen2_vl(tokenizer_dir: Path, target: Path, seed: int = 0) -> Path:
    """``build_qwen2_vl`` with the ``TINY`` sizes."""
    return build_qwen2_vl(tokenizer_dir, target, TINY, seed)


def build_qwen2_vl(tokenizer_dir: Path, target: Path, sizes: dict, seed: int = 0) -> Path:
    """Write a random Qwen2-VL model of ``sizes`` (``TINY`` / ``SMALL``: weights, config, tokenizer,
    image processor, chat template) to ``target`` and return it; built beside it and renamed into
    place (pytest-xdist workers), an existing complete ``target`` returned as it is.
    ``tokenizer_dir``: the SmolLM2 tokenizer."""
    if (target / "model.safetensors").is_file():
        return target
    import torch
    import transformers as t

    tokenizer = t.AutoTokenizer.from_pretrained(tokenizer_dir)
    tokenizer.add_special_tokens({"additional_special_tokens": VISION_TOKENS})
    tokenizer.chat_template = QWEN2_VL_TEMPLATE
    ids = {token: tokenizer.convert_tokens_to_ids(token) for token in VISION_TOKENS}
    special = dict(bos_token_id=1, eos_token_id=2, pad_token_id=2)
    config = t.Qwen2VLConfig(
        text_config=dict(
            **sizes["text"],
            vocab_size=len(tokenizer),
            rope_parameters={"rope_type": "default", "mrope_section": _mrope(sizes["text"]), "rope_theta": 10000.0},
            **special,
        ),
        vision_config=dict(
            **sizes["vision"],
            hidden_size=sizes["text"]["hidden_size"],
            mlp_ratio=2,
            patch_size=14,
            spatial_merge_size=2,
        ),
        image_token_id=ids["<|image_pad|>"],
        video_token_id=ids["<|video_pad|>"],
        vision_start_token_id=ids["<|vision_start|>"],
        vision_end_token_id=ids["<|vision_end|>"],
        tie_word_embeddings=True,
        **special,
    )
    torch.manual_seed(seed)
    model = t.AutoModelForImageTextToText.from_config(config, dtype=torch.float32)
    images = t.Qwen2VLImageProcessorPil(
        min_pixels=28 * 28 * 4, max_pixels=28 * 28 * sizes["max_patches"], patch_size=14, merge_size=2
    )
    return save_staged(target, [model, tokenizer, images], {"chat_template.jinja": QWEN2_VL_TEMPLATE})


def save_staged(target: Path, parts: list, files: Optional[dict[str, str]] = None) -> Path:
    """Save each of ``parts`` (``save_pretrained``) and the text ``files`` into a folder beside
    ``target`` and rename it into place, so concurrent builders (pytest-xdist workers) never see
    half a folder; returns ``target`` (a winner's, when another builder finished first)."""
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{target.name}-", dir=target.parent))
    try:
        for part in parts:
            part.save_pretrained(staging)
        for name, text in (files or {}).items():
            (staging / name).write_text(text, encoding="utf-8")
        os.replace(staging, target)
    except OSError:
        if not (target / "config.json").is_file():
            raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return target
