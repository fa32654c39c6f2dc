"""Transcriptions in the inference worker (``SPEECH_TO_TEXT.load_server``): one speech-to-text model
loaded (a run's folder, adapter or whole; a checkpoint; a merged export; the base model) with the
processor saved beside it, answering transcription commands until the worker is told to exit.

A command's request: ``{"audio": reference, "language": str | None, "task": str | None,
"use_adapter": bool}`` (``reference``: a ``data:`` URL or a confined path, read by
``data.audio.read_audio``); its answer, the ``done`` event's payload: ``{"text": str, "language":
str | None, "duration": seconds of audio, "tokens": generated tokens}``. Language and task default
to the run's own (its ``run.json``), else the model detects the language and transcribes.
"""

from __future__ import annotations

import json
import logging
import time
from pathlib import Path
from typing import Any, Optional

from trainer_core.serving.errors import ChatInputError
from trainer_core.serving.schemas import ModelChoice

log = logging.getLogger(__name__)


def run_settings(folder: Optional[Path]) -> dict[str, Any]:
    """The ``language`` / ``task`` the run in ``folder`` (or its checkpoint's parent) trained with,
    from its ``run.json``; {} where there is none."""
    for candidate in (folder, folder.parent) if folder is not None else ():
        try:
            request = json.loads((candidate / "run.json").read_text(encoding="utf-8")).get("request") or {}
        except (OSError, ValueError, AttributeError):
            continue
        return {key: request.get(key) for key in ("language", "task") if request.get(key)}
    return {}


def load_speech_model(choice: ModelChoice, models_dir: Path, device: str) -> tuple[Any, Any, Path]:
    """(model in eval mode on ``device``, its processor, the base model's folder) for ``choice``:
    the base, a whole model folder, or a LoRA adapter on its base (``PeftModel``). The processor
    is the folder's own where it has one, else the base's. Raises ModelLoadError."""
    from transformers import AutoModelForSpeechSeq2Seq

    from trainer_core.kinds.speech_to_text.loading import load_processor
    from trainer_core.serving.loader import load_choice_weights

    model, base, processor_folder = load_choice_weights(
        choice, models_dir, AutoModelForSpeechSeq2Seq, "speech-to-text model"
    )
    return model.to(device).eval(), load_processor(processor_folder), base


class SpeechServer:
    """A loaded speech-to-text ``choice``; ``answer`` transcribes one clip (see the module
    docstring). Raises ModelLoadError when the model cannot be loaded."""

    def __init__(self, choice: ModelChoice, models_dir: Path, device: Optional[str] = None) -> None:
        from trainer_core.models import loading

        began = time.monotonic()
        self.choice, self.device = choice, device or loading.pick_device()
        self.model, self.processor, _ = load_speech_model(choice, models_dir, self.device)
        self.defaults = run_settings(Path(choice.path) if choice.path else None)
        self.load_seconds = time.monotonic() - began
        log.info("speech-to-text model %s loaded on %s in %.1f s", choice.id, self.device, self.load_seconds)

    def answer(self, request: dict[str, Any]) -> dict[str, Any]:
        """The transcript of ``request["audio"]``. Raises ChatInputError for a chat or embeddings
        request, audio that cannot be read (``file``) or a language Whisper does not know."""
        if "audio" not in request:
            raise ChatInputError(
                f"{self.choice.id} is a speech-to-text model: it answers transcriptions "
                "(POST /v1/audio/transcriptions), not chat or embeddings",
                fields=("model",),
                code="speech_to_text_model",
            )
        from trainer_core.data.audio import read_audio
        from trainer_core.data.errors import RowError

        rate = self.processor.feature_extractor.sampling_rate
        window = getattr(self.processor.feature_extractor, "chunk_length", None)
        try:
            clip = read_audio(request["audio"], sampling_rate=rate, max_seconds=window)
        except RowError as exc:
            raise ChatInputError(f"file: {exc}", fields=("file",), code="audio_unreadable") from None
        language = request.get("language") or self.defaults.get("language")
        task = request.get("task") or self.defaults.get("task") or "transcribe"
        text, tokens = transcribe(self.model, self.processor, clip, language, task, request.get("use_adapter", True))
        return {"text": text, "language": language, "duration": len(clip) / rate, "tokens": tokens}


def transcribe(
    model: Any, processor: Any, clip: Any, language: Optional[str], task: str, use_adapter: bool = True
) -> tuple[str, int]:
    """(text, generated tokens) of ``clip`` (mono float32 at the feature extractor's rate) by
    ``model``'s greedy ``generate(language=, task=)``, special tokens left out; ``use_adapter``
    False: a LoRA model's base (adapter disabled). Raises ChatInputError (``language``) for a
    language Whisper does not know."""
    import contextlib

    import torch

    from trainer_core.kinds.speech_to_text.collator import language_code
    from trainer_core.refusals import Refusal

    try:
        code = language_code(language)
    except Refusal as exc:
        raise ChatInputError(str(exc), fields=("language",), code=exc.code) from None
    extractor = processor.feature_extractor
    features = extractor([clip], sampling_rate=extractor.sampling_rate, return_tensors="pt").input_features
    dtype = next(p.dtype for p in model.parameters() if p.is_floating_point())
    features = features.to(device=next(model.parameters()).device, dtype=dtype)
    off = model.disable_adapter() if not use_adapter and hasattr(model, "disable_adapter") else contextlib.nullcontext()
    with torch.inference_mode(), off:
        ids = model.generate(input_features=features, language=code, task=task, do_sample=False)
    return processor.tokenizer.decode(ids[0], skip_special_tokens=True).strip(), int(ids.shape[-1])
