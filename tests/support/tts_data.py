"""(text, audio, speaker) files for the text-to-speech tests (``bench.csm_model.tts_file``: two of
the shared demo clips copied beside a JSON file that names them, each with a speaker number, as
users bring them; the TTS speed bench trains on them too); and a LoRA run of a CSM model made as training
makes it (``training.wiring.add_lora``, no step run: PEFT's random init, so the tuned
model differs from the base) for the serving tests; and such a run of an Orpheus-style model."""

from __future__ import annotations

import json
from pathlib import Path

from bench.csm_model import ROWS, tts_file
from tests.support.speech_data import speech_request

__all__ = ["ROWS", "lora_tts_run", "tts_file"]


def lora_tts_run(base: Path, folder: Path) -> Path:
    """A LoRA run's folder of CSM ``base`` in ``folder`` (adapter, processor, run.json)."""
    import dataclasses

    import torch
    from peft import get_peft_model
    from transformers import CsmForConditionalGeneration

    from trainer_core.kinds.text_to_speech.serve import load_processor
    from trainer_core.training.wiring import new_lora

    request = speech_request(base, folder / "none.json")
    torch.manual_seed(0)
    model = CsmForConditionalGeneration.from_pretrained(base)
    config = dataclasses.replace(new_lora(request, model), task_type=None, init_lora_weights=False)
    get_peft_model(model, config).save_pretrained(folder)
    load_processor(base).save_pretrained(folder)
    (folder / "run.json").write_text(json.dumps({"request": {"model_name": str(base)}}), encoding="utf-8")
    return folder


def lora_orpheus_run(base: Path, codec: Path, data: Path, folder: Path) -> Path:
    """A LoRA run's folder of Orpheus-style ``base`` in ``folder`` as training makes it (PEFT's random
    init, so the tuned model differs from the base; no step run): the adapter, the tokenizer's files
    naming ``codec`` (copied, not loaded: 28,682 added tokens take seconds) and ``request.json`` (a
    50 % held-out split of ``data``)."""
    import dataclasses
    import shutil

    import torch
    from peft import get_peft_model
    from transformers import AutoModelForCausalLM

    from trainer_core.kinds.orpheus.codec import CODEC_KEY
    from trainer_core.training.wiring import new_lora

    request = speech_request(base, data, val_size=0.5, max_seq_length=1024, audio_codec=str(codec))
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_pretrained(base)
    get_peft_model(model, dataclasses.replace(new_lora(request, model), init_lora_weights=False)).save_pretrained(
        folder
    )
    for name in ("tokenizer.json", "chat_template.jinja"):
        shutil.copy(base / name, folder / name)
    config = json.loads((base / "tokenizer_config.json").read_text(encoding="utf-8"))
    (folder / "tokenizer_config.json").write_text(json.dumps({**config, CODEC_KEY: str(codec)}), encoding="utf-8")
    (folder / "request.json").write_text(json.dumps(request.public_dict()), encoding="utf-8")  # as the runner does
    return folder
