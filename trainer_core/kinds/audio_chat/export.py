"""Export of an audio-in chat model where it differs from a text LM's: its GGUF export, which
llama.cpp runs as the language model plus a projector file (``mmproj``: the audio encoder and
projector, run by llama-mtmd-cli / llama-server with ``--mmproj``), which its converter writes for
the architectures in its ``MMPROJ_MODEL_MAP`` (``Qwen2AudioForConditionalGeneration``: as
``ultravox``); and its merged folder's card usage (``card_usage``: a question about a clip)."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

from trainer_core.export.card import clip_lines
from trainer_core.export.gguf_convert import supported_architectures
from trainer_core.kinds.audio_chat.family import audio_chat_family


def projector_problem(config: dict, folder: Path) -> Optional[str]:
    """Why llama.cpp's converter in ``folder`` cannot write the ``mmproj`` file (audio encoder and
    projector) of an audio-in chat model with this config.json, or None (also None for a model of
    another kind, or when the registry cannot be read)."""
    family = audio_chat_family(config)
    known = supported_architectures(folder, "MMPROJ_MODEL_MAP")
    architectures = config.get("architectures") or []
    if family is None or not known or not architectures or architectures[0] in known:
        return None
    return (
        f"GGUF export of {family.name} needs llama.cpp's projector file (mmproj) for its audio, and llama.cpp's "
        f"converter cannot write one for {architectures[0]}; export the merged model or the adapter instead"
    )


def card_usage(auto_class: str) -> list[str]:
    """The card's usage of a merged folder loaded by ``auto_class`` (the kind's): a clip read at the
    feature extractor's rate and a question about it, through the processor's chat template."""
    return [
        "import soundfile as sf",
        "import soxr",
        f"from transformers import AutoProcessor, {auto_class}",
        "",
        'processor = AutoProcessor.from_pretrained("PATH_TO_THIS_FOLDER")',
        f'model = {auto_class}.from_pretrained("PATH_TO_THIS_FOLDER")',
        "rate = processor.feature_extractor.sampling_rate",
        *clip_lines("question.wav", "rate"),
        'messages = [{"role": "user", "content": [{"type": "audio"}, {"type": "text", "text": "What do you hear?"}]}]',
        "text = processor.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)",
        'inputs = processor(text=[text], audio=[audio], sampling_rate=rate, return_tensors="pt")',
        'answer = model.generate(**inputs, max_new_tokens=64)[0, inputs["input_ids"].shape[1] :]',
        "print(processor.decode(answer, skip_special_tokens=True))",
    ]
