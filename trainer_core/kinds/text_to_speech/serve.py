"""Speech in the inference worker (``TEXT_TO_SPEECH.load_server``): one CSM model loaded (a run's
folder, adapter or whole; a checkpoint; a merged export; the base model) with the processor saved
beside it, speaking text until the worker is told to exit.

A command's request: ``{"input": text, "voice": speaker id (int), "use_adapter": bool}``; its
answer, the ``done`` event's payload: ``{"samples": float32 array (samples,), "sampling_rate": Hz,
"seconds": samples / rate, "frames": codec frames said}``. The speech is CSM's own ``generate``
(the backbone and depth decoder say codec frames until the end frame or ``max_new_tokens``) with the
model's generation config (its sampling settings; at most ``MAX_SPEECH_SECONDS``) and a fixed seed,
so the same text and voice give the same speech; its frames are decoded by the Mimi codec as
``generate(output_audio=True)`` decodes them (``decode``), except that a model whose first frame is
the end says no samples instead of failing in the codec. A text whose prompt and longest speech
are more than the model's positions is refused (``frame_budget``), never cut.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import Any, Optional

from trainer_core.models.loading import ModelLoadError
from trainer_core.serving.errors import ChatInputError
from trainer_core.serving.schemas import ModelChoice

log = logging.getLogger(__name__)
MAX_SPEECH_SECONDS = 60.0  # the longest speech one request makes (750 frames at 12.5 a second)
SEED = 0  # the sampling seed of every request


def load_processor(path: Path, **kwargs: Any) -> Any:
    """The ``CsmProcessor`` (``AutoProcessor``) saved with the model in ``path``; ``kwargs`` go to
    ``from_pretrained``. Raises ModelLoadError naming the folder when it has no feature extractor,
    tokenizer or chat template."""
    from transformers import AutoProcessor

    try:
        processor = AutoProcessor.from_pretrained(path, **kwargs)
    except (ImportError, OSError, ValueError, TypeError) as exc:
        raise ModelLoadError(f"could not load the processor of {path}: {exc}") from exc
    if getattr(processor, "feature_extractor", None) is None or not getattr(processor, "chat_template", None):
        raise ModelLoadError(
            f"{path} has no CSM processor (processor_config.json, the tokenizer files and chat_template.jinja): a "
            "text-to-speech model folder needs the processor saved beside the weights (processor.save_pretrained)"
        )
    from trainer_core.kinds.text_to_speech.collator import forget_padding

    return forget_padding(processor)  # a folder saved with the tokenizer's padding on (collator's docstring)


def load_tts_model(choice: ModelChoice, models_dir: Path, device: str) -> tuple[Any, Any]:
    """(model in eval mode on ``device``, its processor) for ``choice``: the base, a whole model
    folder, or a LoRA adapter on its base (``PeftModel``). The processor is the folder's own where
    it has one, else the base's. Raises ModelLoadError."""
    from transformers import CsmForConditionalGeneration

    from trainer_core.serving.loader import load_choice_weights

    model, _base, processor_folder = load_choice_weights(
        choice, models_dir, CsmForConditionalGeneration, "text-to-speech model"
    )
    return model.to(device).eval(), load_processor(processor_folder)


def decode(model: Any, codes: Any) -> Any:
    """Float32 samples (samples,) of one utterance's generated codec frames ``codes`` (frames,
    codebooks), cut at the first end frame (every codebook ``codebook_eos_token_id``), by the
    model's codec, as CSM's ``generate(output_audio=True)`` does; no samples when the first frame
    is the end (the codec cannot decode no frames)."""
    import numpy as np
    import torch

    inner = model.get_base_model() if hasattr(model, "get_base_model") else model
    ends = (codes == inner.config.codebook_eos_token_id).all(dim=-1).nonzero()
    codes = codes[: int(ends.min())] if ends.numel() else codes
    if codes.shape[0] == 0:
        return np.zeros(0, dtype=np.float32)
    with torch.inference_mode():
        audio = inner.codec_model.decode(codes.transpose(0, 1).unsqueeze(0)).audio_values[0, 0]
    return audio.float().cpu().numpy().astype(np.float32)


def frame_budget(model: Any, prompt_tokens: int) -> int:
    """The codec frames the model may say after a prompt of ``prompt_tokens`` positions: its
    generation config's ``max_new_tokens``, at most ``MAX_SPEECH_SECONDS`` of them. Raises
    ChatInputError (``fields`` ``input``, code ``input_too_long``) when the prompt and those frames
    are more than the backbone's ``max_position_embeddings`` (the speech could be cut unsaid)."""
    from trainer_core.kinds.text_to_speech.data import FRAMES_PER_SECOND

    inner = model.get_base_model() if hasattr(model, "get_base_model") else model
    limit = int(MAX_SPEECH_SECONDS * FRAMES_PER_SECOND)
    frames = min(inner.generation_config.max_new_tokens or limit, limit)
    positions = int(inner.config.max_position_embeddings)
    if prompt_tokens + frames > positions:
        raise ChatInputError(
            f"input: the text takes {prompt_tokens} tokens and its speech up to {frames} codec frames "
            f"({frames / FRAMES_PER_SECOND:g} s), more than the {positions} positions this model reads; "
            f"say a text of at most {max(positions - frames, 0)} tokens",
            fields=("input",),
            code="input_too_long",
        )
    return frames


def speak(model: Any, processor: Any, text: str, speaker: int, use_adapter: bool = True) -> tuple[Any, int]:
    """(float32 samples (samples,) at the codec's rate, codec frames said) of speaker ``speaker``
    saying ``text``; ``use_adapter`` False: a LoRA model's base (adapter disabled). Raises
    ChatInputError for a text too long for the model (``frame_budget``)."""
    import contextlib

    import torch

    from trainer_core.kinds.text_to_speech.collator import render
    from trainer_core.kinds.text_to_speech.data import FRAMES_PER_SECOND

    device = next(model.parameters()).device
    inputs = processor(text=[render(processor, text, speaker, audio=False)]).to(device)
    frames = frame_budget(model, int(inputs["input_ids"].shape[-1]))
    off = model.disable_adapter() if not use_adapter and hasattr(model, "disable_adapter") else contextlib.nullcontext()
    torch.manual_seed(SEED)
    with torch.inference_mode(), off:
        codes = model.generate(**inputs, max_new_tokens=frames)  # (1, frames, codebooks)
    samples = decode(model, codes[0])
    rate = processor.feature_extractor.sampling_rate
    return samples, round(len(samples) / rate * FRAMES_PER_SECOND)


def refuse_other_requests(model_id: str, request: dict[str, Any]) -> None:
    """Raise ChatInputError (field ``model``) for a request that is not for speech (chat, embeddings,
    transcriptions: no ``input`` and ``voice``) made of text-to-speech model ``model_id``."""
    if "input" not in request or "voice" not in request:
        raise ChatInputError(
            f"{model_id} is a text-to-speech model: it answers speech (POST /v1/audio/speech), not chat, "
            "embeddings or transcriptions",
            fields=("model",),
            code="text_to_speech_model",
        )


class TtsServer:
    """A loaded text-to-speech ``choice``; ``answer`` speaks one text (see the module docstring).
    Raises ModelLoadError when the model cannot be loaded."""

    def __init__(self, choice: ModelChoice, models_dir: Path, device: Optional[str] = None) -> None:
        from trainer_core.models import loading

        began = time.monotonic()
        self.choice, self.device = choice, device or loading.pick_device()
        self.model, self.processor = load_tts_model(choice, models_dir, self.device)
        self.load_seconds = time.monotonic() - began
        log.info("text-to-speech model %s loaded on %s in %.1f s", choice.id, self.device, self.load_seconds)

    def answer(self, request: dict[str, Any]) -> dict[str, Any]:
        """The speech of ``request["input"]`` in voice ``request["voice"]`` (a speaker number). Raises
        ChatInputError for a chat, embeddings or transcription request, or a voice that is no number."""
        refuse_other_requests(self.choice.id, request)
        voice = str(request["voice"]).strip()
        if not voice.isdigit():
            raise ChatInputError(
                f"voice: {voice[:40]!r} is not a speaker id: this CSM model's voices are numbered (0, 1, ...: the "
                "speaker numbers of its training rows)",
                fields=("voice",),
                code="voice_not_a_speaker_id",
            )
        began = time.perf_counter()
        samples, frames = speak(
            self.model, self.processor, request["input"], int(voice), request.get("use_adapter", True)
        )
        rate = int(self.processor.feature_extractor.sampling_rate)
        log.info(
            "spoke %.2f s of audio (%d frames) in %.2f s", len(samples) / rate, frames, time.perf_counter() - began
        )
        return {"samples": samples, "sampling_rate": rate, "seconds": len(samples) / rate, "frames": frames}
