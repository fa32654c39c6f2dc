"""Random Qwen2-Audio models built offline from their transformers config, for the audio-chat tests
(the Hub cannot be reached here, and no Qwen2-Audio checkpoint ships with the studio).

Each has Qwen2-Audio's architecture (a Whisper-style audio encoder over 128 log-mel bins, its
projector, a Qwen2 language model), the bundled SmolLM2 tokenizer plus Qwen2-Audio's audio tokens
(``<|audio_bos|>``, ``<|AUDIO|>``, ``<|audio_eos|>``), Qwen2-Audio-7B-Instruct's chat template and a
``Qwen2AudioProcessor`` made of a ``WhisperFeatureExtractor`` (16 kHz, 30 s windows: 750 audio
tokens a clip) and that tokenizer. ``TINY``: hidden 64, 3 encoder layers, 2 language model layers. Weights are random: outputs mean nothing.
"""

from __future__ import annotations

from pathlib import Path

from bench.vision_model import save_staged

AUDIO_TOKENS = ["<|audio_bos|>", "<|AUDIO|>", "<|audio_eos|>"]
# Qwen2-Audio-7B-Instruct's chat_template.json, as published (each audio part: "Audio N: " and its tokens).
QWEN2_AUDIO_TEMPLATE = (
    "{% set audio_count = namespace(value=0) %}{% for message in messages %}{% if loop.first and message['role'] != "
    "'system' %}<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n{% endif %}<|im_start|>{{ message['role'] "
    "}}\n{% if message['content'] is string %}{{ message['content'] }}<|im_end|>\n{% else %}{% for content in "
    "message['content'] %}{% if 'audio' in content or 'audio_url' in content or content['type'] == 'audio' %}"
    "{% set audio_count.value = audio_count.value + 1 %}Audio {{ audio_count.value }}: "
    "<|audio_bos|><|AUDIO|><|audio_eos|>\n{% elif 'text' in content %}{{ content['text'] }}{% endif %}{% endfor %}"
    "<|im_end|>\n{% endif %}{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
TINY = dict(
    text=dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2),
    # 3 encoder layers at least: llama.cpp's converter maps the encoder's conv1 / conv2 by block id
    audio=dict(d_model=64, encoder_layers=3, encoder_attention_heads=4, encoder_ffn_dim=128, num_mel_bins=128),
)


def build_tiny_qwen2_audio(tokenizer_dir: Path, target: Path, seed: int = 0) -> Path:
    """Write a random ``TINY`` Qwen2-Audio (weights, config, tokenizer with the audio tokens, feature
    extractor, chat template: ``Qwen2AudioProcessor.save_pretrained``) to ``target`` and return it;
    built beside it and renamed into place, an existing complete ``target`` returned as it is.
    ``tokenizer_dir``: the SmolLM2 tokenizer (e.g. the tiny SmolLM2's folder)."""
    if (target / "model.safetensors").is_file():
        return target
    import torch
    import transformers as t

    tokenizer = t.AutoTokenizer.from_pretrained(tokenizer_dir)
    tokenizer.add_special_tokens({"additional_special_tokens": AUDIO_TOKENS})
    tokenizer.chat_template = QWEN2_AUDIO_TEMPLATE
    special = dict(bos_token_id=1, eos_token_id=2, pad_token_id=2)
    config = t.Qwen2AudioConfig(
        audio_config=dict(model_type="qwen2_audio_encoder", **TINY["audio"]),
        text_config=dict(
            model_type="qwen2", vocab_size=len(tokenizer), tie_word_embeddings=True, **TINY["text"], **special
        ),
        audio_token_index=tokenizer.convert_tokens_to_ids("<|AUDIO|>"),
        **special,
    )
    torch.manual_seed(seed)
    model = t.Qwen2AudioForConditionalGeneration(config)
    features = t.WhisperFeatureExtractor(feature_size=TINY["audio"]["num_mel_bins"])
    processor = t.Qwen2AudioProcessor(
        feature_extractor=features, tokenizer=tokenizer, chat_template=QWEN2_AUDIO_TEMPLATE
    )
    return save_staged(target, [model, processor])
