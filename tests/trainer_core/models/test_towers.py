"""A tower's parameters counted without weights: the tiny Qwen2-Audio's audio encoder and projector,
as many as the loaded model holds outside its language model."""

from __future__ import annotations

from transformers import AutoConfig, Qwen2AudioForConditionalGeneration

from trainer_core.models.towers import outside_language_parameters


def test_the_audio_tower_and_projector_are_counted_from_the_config(tiny_audio_chat_dir):
    model = Qwen2AudioForConditionalGeneration.from_pretrained(tiny_audio_chat_dir)
    outside = sum(p.numel() for name, p in model.named_parameters() if "audio_tower" in name or "projector" in name)
    config = AutoConfig.from_pretrained(tiny_audio_chat_dir)
    assert outside_language_parameters(config, "AutoModelForMultimodalLM") == outside > 200_000
    assert outside_language_parameters(config.to_dict(), "AutoModelForMultimodalLM") == 0  # the JSON alone: unknown
