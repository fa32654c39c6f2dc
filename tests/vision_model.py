"""A tiny random Qwen2-VL model, built offline from its transformers config, for the vision tests.

Hidden 64, 2 language layers, a 1-block vision tower (embed 32) with Qwen2-VL's 14-pixel patches
merged 2 x 2, the bundled SmolLM2 tokenizer plus Qwen2-VL's vision tokens (``<|vision_start|>``,
``<|vision_end|>``, ``<|image_pad|>``, ``<|video_pad|>``) and Qwen2-VL's own chat template; the
image processor is capped at 16 merged patches an image (28 x 28 x 16 pixels), so an image costs
4-16 tokens. Weights are random: outputs mean nothing.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

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


def build_tiny_qwen2_vl(tokenizer_dir: Path, target: Path, seed: int = 0) -> Path:
    """Write the tiny Qwen2-VL model (weights, config, tokenizer, image processor, chat template)
    to ``target`` and return it; built beside it and renamed into place (pytest-xdist workers), an
    existing complete ``target`` returned as it is. ``tokenizer_dir``: the SmolLM2 tokenizer."""
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
            hidden_size=64,
            intermediate_size=128,
            num_hidden_layers=2,
            num_attention_heads=4,
            num_key_value_heads=2,
            vocab_size=len(tokenizer),
            rope_parameters={"rope_type": "default", "mrope_section": [2, 3, 3], "rope_theta": 10000.0},
            **special,
        ),
        vision_config=dict(
            depth=1, embed_dim=32, hidden_size=64, num_heads=2, mlp_ratio=2, patch_size=14, spatial_merge_size=2
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
    images = t.Qwen2VLImageProcessorPil(min_pixels=28 * 28 * 4, max_pixels=28 * 28 * 16, patch_size=14, merge_size=2)
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{target.name}-", dir=target.parent))
    try:
        model.save_pretrained(staging)
        tokenizer.save_pretrained(staging)
        images.save_pretrained(staging)
        (staging / "chat_template.jinja").write_text(QWEN2_VL_TEMPLATE, encoding="utf-8")
        os.replace(staging, target)
    except OSError:
        if not (target / "config.json").is_file():
            raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return target
