"""Tiny random vision-language models of the families people fine-tune besides Qwen2-VL
(``bench.vision_model``), built offline from their transformers configs: LLaVA (CLIP tower, a
``<image>`` token repeated per patch), Gemma 3 (SigLIP tower, ``<start_of_image>`` expanded to a
pooled run of ``<image_soft_token>``) and Idefics3 / SmolVLM (SigLIP-style tower, pixel shuffle,
``<fake_token_around_image>`` around each image). Language model: hidden 64, 2 layers; tower: 1
layer of width 32 over 56 x 56 pixel images; the bundled SmolLM2 tokenizer plus each family's image
tokens and chat template (as the released models publish them). Weights are random."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from bench.vision_model import save_staged

TEXT = dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2)
TOWER = dict(
    hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=2, image_size=56, patch_size=14
)
SPECIAL = dict(bos_token_id=1, eos_token_id=2, pad_token_id=2)

LLAVA_TEMPLATE = (
    "{% for message in messages %}{% if message['role'] != 'system' %}{{ message['role'].upper() + ': '}}{% endif %}"
    "{% for content in message['content'] | selectattr('type', 'equalto', 'image') %}{{ '<image>\n' }}{% endfor %}"
    "{% for content in message['content'] | selectattr('type', 'equalto', 'text') %}{{ content['text'] + ' '}}"
    "{% endfor %}{% endfor %}{% if add_generation_prompt %}{{ 'ASSISTANT:' }}{% endif %}"
)
GEMMA3_TEMPLATE = (
    "{{ bos_token }}{%- if messages[0]['role'] == 'system' -%}{%- if messages[0]['content'] is string -%}"
    "{%- set first_user_prefix = messages[0]['content'] + '\n\n' -%}{%- else -%}"
    "{%- set first_user_prefix = messages[0]['content'][0]['text'] + '\n\n' -%}{%- endif -%}"
    '{%- set loop_messages = messages[1:] -%}{%- else -%}{%- set first_user_prefix = "" -%}'
    "{%- set loop_messages = messages -%}{%- endif -%}{%- for message in loop_messages -%}"
    "{%- if (message['role'] == 'user') != (loop.index0 % 2 == 0) -%}"
    '{{ raise_exception("Conversation roles must alternate user/assistant/user/assistant/...") }}{%- endif -%}'
    "{%- if (message['role'] == 'assistant') -%}{%- set role = \"model\" -%}{%- else -%}"
    "{%- set role = message['role'] -%}{%- endif -%}"
    "{{ '<start_of_turn>' + role + '\n' + (first_user_prefix if loop.first else \"\") }}"
    "{%- if message['content'] is string -%}{{ message['content'] | trim }}"
    "{%- elif message['content'] is iterable -%}{%- for item in message['content'] -%}"
    "{%- if item['type'] == 'image' -%}{{ '<start_of_image>' }}{%- elif item['type'] == 'text' -%}"
    "{{ item['text'] | trim }}{%- endif -%}{%- endfor -%}{%- else -%}{{ raise_exception(\"Invalid content type\") }}"
    "{%- endif -%}{{ '<end_of_turn>\n' }}{%- endfor -%}{%- if add_generation_prompt -%}{{'<start_of_turn>model\n'}}"
    "{%- endif -%}"
)
IDEFICS3_TEMPLATE = (
    "<|im_start|>{% for message in messages %}{{message['role'] | capitalize}}"
    "{% if message['content'][0]['type'] == 'image' %}{{':'}}{% else %}{{': '}}{% endif %}"
    "{% for line in message['content'] %}{% if line['type'] == 'text' %}{{line['text']}}"
    "{% elif line['type'] == 'image' %}{{ '<image>' }}{% endif %}{% endfor %}<end_of_utterance>\n{% endfor %}"
    "{% if add_generation_prompt %}{{ 'Assistant:' }}{% endif %}"
)
VISION_FAMILIES = ("llava", "gemma3", "idefics3")


def _tokenizer(tokenizer_dir: Path, tokens: list[str], template: str, **extra: Any) -> Any:
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(tokenizer_dir, **extra)
    tokenizer.add_special_tokens({"additional_special_tokens": tokens})
    tokenizer.chat_template = template
    return tokenizer


def _llava(tokenizer_dir: Path) -> tuple[Any, Any, Any]:
    import transformers as t

    tokenizer = _tokenizer(tokenizer_dir, ["<image>"], LLAVA_TEMPLATE)
    config = t.LlavaConfig(
        vision_config=t.CLIPVisionConfig(**TOWER),
        text_config=t.LlamaConfig(**TEXT, vocab_size=len(tokenizer), **SPECIAL),
        image_token_id=tokenizer.convert_tokens_to_ids("<image>"),
        vision_feature_layer=-1,
    )
    images = t.CLIPImageProcessorPil(size={"shortest_edge": 56}, crop_size={"height": 56, "width": 56})
    processor = t.LlavaProcessor(
        image_processor=images,
        tokenizer=tokenizer,
        patch_size=14,
        vision_feature_select_strategy="default",
        num_additional_image_tokens=1,
        chat_template=LLAVA_TEMPLATE,
    )
    return config, processor, tokenizer


def _gemma3(tokenizer_dir: Path) -> tuple[Any, Any, Any]:
    import transformers as t

    names = {"boi_token": "<start_of_image>", "eoi_token": "<end_of_image>", "image_token": "<image_soft_token>"}
    tokenizer = _tokenizer(tokenizer_dir, list(names.values()), GEMMA3_TEMPLATE, extra_special_tokens=names)
    ids = {key: tokenizer.convert_tokens_to_ids(value) for key, value in names.items()}
    config = t.Gemma3Config(
        text_config=t.Gemma3TextConfig(**TEXT, head_dim=16, sliding_window=32, vocab_size=len(tokenizer), **SPECIAL),
        vision_config=t.SiglipVisionConfig(**TOWER),
        mm_tokens_per_image=4,
        boi_token_index=ids["boi_token"],
        eoi_token_index=ids["eoi_token"],
        image_token_index=ids["image_token"],
    )
    images = t.Gemma3ImageProcessorPil(size={"height": 56, "width": 56})
    processor = t.Gemma3Processor(
        image_processor=images, tokenizer=tokenizer, image_seq_length=4, chat_template=GEMMA3_TEMPLATE
    )
    return config, processor, tokenizer


def _idefics3(tokenizer_dir: Path) -> tuple[Any, Any, Any]:
    import transformers as t

    tokens = ["<fake_token_around_image>", "<image>", "<end_of_utterance>", "<global-img>"]
    tokenizer = _tokenizer(tokenizer_dir, tokens, IDEFICS3_TEMPLATE)
    config = t.Idefics3Config(
        vision_config=dict(**TOWER),
        text_config=dict(model_type="llama", **TEXT, vocab_size=len(tokenizer), **SPECIAL),
        scale_factor=2,
        image_token_id=tokenizer.convert_tokens_to_ids("<image>"),
    )
    images = t.Idefics3ImageProcessorPil(
        do_image_splitting=False, size={"longest_edge": 56}, max_image_size={"longest_edge": 56}
    )
    processor = t.Idefics3Processor(
        image_processor=images, tokenizer=tokenizer, image_seq_len=4, chat_template=IDEFICS3_TEMPLATE
    )
    return config, processor, tokenizer


def build_vision_family(family: str, tokenizer_dir: Path, target: Path, seed: int = 0) -> Path:
    """Write the tiny ``family`` model (one of ``VISION_FAMILIES``) with its processor and chat
    template to ``target`` and return it; built beside it and renamed into place, an existing
    complete ``target`` returned as it is."""
    if (target / "model.safetensors").is_file():
        return target
    import torch
    from transformers import AutoModelForImageTextToText

    config, processor, _ = {"llava": _llava, "gemma3": _gemma3, "idefics3": _idefics3}[family](tokenizer_dir)
    torch.manual_seed(seed)
    model = AutoModelForImageTextToText.from_config(config, dtype=torch.float32)
    return save_staged(target, [model, processor])
