"""Speech in the inference worker (``ORPHEUS.load_server``): one Orpheus-style model loaded as the
text path loads a causal LM (``serving.loader.load_choice``: a run's folder, adapter or whole; a
checkpoint; a merged export; the base), its SNAC codec beside it (the one the run's tokenizer names,
``codec.CODEC_KEY``, else ``audio_codec``'s default), speaking text until the worker is told to exit.

A command's request: ``{"input": text, "voice": speaker (the name its rows gave, said as "voice:
text"; "" for none), "use_adapter": bool}``; its answer, the ``done`` event's payload:
``{"samples": float32 array (samples,), "sampling_rate": Hz, "seconds": samples / rate, "frames":
SNAC frames said}``. The model says tokens after the prompt (``tokens.prompt_ids``, ending with
start_of_speech) until end_of_speech or the frame budget (its generation config's
``max_new_tokens``, at most ``MAX_SPEECH_SECONDS``), with the generation config's sampling settings
and a fixed seed; each position may only be a code of its frame position, or end_of_speech at a
frame's start (``CodesOnly``), so whatever it says is SNAC codes, which the codec decodes into
``frames * samples_per_frame`` samples.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import Any, Optional

from trainer_core.kinds.orpheus import codec as snac
from trainer_core.kinds.orpheus.family import CODEBOOK_SIZE
from trainer_core.kinds.orpheus.tokens import FRAME, OrpheusTokens, deinterleave, prompt_ids
from trainer_core.kinds.text_to_speech.serve import refuse_other_requests
from trainer_core.serving.errors import ChatInputError
from trainer_core.serving.schemas import ModelChoice

log = logging.getLogger(__name__)
MAX_SPEECH_SECONDS = 60.0  # the longest speech one request makes
SEED = 0  # the sampling seed of every request


class CodesOnly:
    """A transformers logits processor: after a prompt of ``prompt_length`` positions, the token at
    a frame's position p may only be a code of position p, or end_of_speech where p is 0 (scores
    (B, vocab) of every other token set to -inf)."""

    def __init__(self, ids: OrpheusTokens, prompt_length: int) -> None:
        self.ids, self.prompt_length = ids, prompt_length

    def __call__(self, input_ids: Any, scores: Any) -> Any:
        import torch

        position = (input_ids.shape[-1] - self.prompt_length) % FRAME
        low = self.ids.first_code + position * CODEBOOK_SIZE
        allowed = torch.full_like(scores, float("-inf"))
        allowed[:, low : low + CODEBOOK_SIZE] = 0.0
        if position == 0:
            allowed[:, self.ids.end_of_speech] = 0.0
        return scores + allowed


def frame_budget(model: Any, prompt_tokens: int, config: dict[str, Any]) -> int:
    """The frames the model may say after a prompt of ``prompt_tokens``: its generation config's
    ``max_new_tokens`` / 7, at most ``MAX_SPEECH_SECONDS`` of them. Raises ChatInputError (field
    ``input``, code ``input_too_long``) when the prompt and those frames pass the model's positions."""
    per_second = snac.sampling_rate(config) / snac.samples_per_frame(config)
    limit = int(MAX_SPEECH_SECONDS * per_second)
    frames = min((model.generation_config.max_new_tokens or limit * FRAME) // FRAME, limit)
    positions = int(getattr(model.config, "max_position_embeddings", 0) or 0)
    if positions and prompt_tokens + FRAME * frames + 1 > positions:
        raise ChatInputError(
            f"input: the text takes {prompt_tokens} tokens and its speech up to {frames} frames of {FRAME} tokens "
            f"({frames / per_second:.1f} s), more than the {positions} positions this model reads; say a shorter text",
            fields=("input",),
            code="input_too_long",
        )
    return frames


def speak(loaded: Any, codec: Any, config: dict[str, Any], text: str, voice: str, use_adapter: bool = True) -> Any:
    """(float32 samples (frames * samples_per_frame,), frames said) of ``loaded``
    (``serving.loader.LoadedModel``) saying ``text`` as speaker ``voice`` ("" for none) through
    ``codec``; ``use_adapter`` False: its base. Raises ChatInputError (``frame_budget``)."""
    import torch

    ids = OrpheusTokens.of(loaded.tokenizer)
    prompt = prompt_ids(ids, loaded.tokenizer, text, voice)
    with loaded.weights(use_adapter) as model:
        frames = frame_budget(model, len(prompt), config)
        inputs = torch.tensor([prompt], device=loaded.device)
        torch.manual_seed(SEED)
        with torch.inference_mode():
            out = model.generate(
                input_ids=inputs,
                attention_mask=torch.ones_like(inputs),
                max_new_tokens=FRAME * frames,
                eos_token_id=ids.end_of_speech,
                pad_token_id=ids.pad,
                logits_processor=[CodesOnly(ids, len(prompt))],
            )
    said = out[0, len(prompt) :].tolist()
    said = said[: said.index(ids.end_of_speech)] if ids.end_of_speech in said else said
    levels = deinterleave(said, ids.first_code)
    return snac.decode(codec, levels), len(levels[0])


def voice_of(request: dict[str, Any]) -> str:
    """The speaker of a request's ``voice`` (a name or number; "" for none)."""
    voice = request.get("voice")
    return "" if voice is None else str(voice).strip()


class OrpheusServer:
    """A loaded Orpheus-style ``choice`` and its codec; ``answer`` speaks one text (see the module
    docstring). Raises ModelLoadError (the model) or ChatInputError (its codec not found)."""

    def __init__(self, choice: ModelChoice, models_dir: Path, device: Optional[str] = None) -> None:
        from trainer_core.request.audio import SNAC_24KHZ
        from trainer_core.serving.loader import load_choice

        began = time.monotonic()
        self.choice = choice
        self.loaded = load_choice(choice, models_dir, device)
        self.device = self.loaded.device
        name = self.loaded.tokenizer.init_kwargs.get(snac.CODEC_KEY) or SNAC_24KHZ
        try:
            folder = snac.codec_folder(name)  # a path: confined when the run was admitted
            self.config = snac.codec_config(folder)
        except snac.CodecMissing as exc:
            raise ChatInputError(str(exc), fields=("model",), code=exc.code) from None
        self.codec = snac.load_codec(folder, self.device)
        self.load_seconds = time.monotonic() - began
        log.info(
            "Orpheus model %s and its codec %s loaded on %s in %.1f s", choice.id, name, self.device, self.load_seconds
        )

    def answer(self, request: dict[str, Any]) -> dict[str, Any]:
        """The speech of ``request["input"]`` as speaker ``request["voice"]``. Raises ChatInputError
        for a chat, embeddings or transcription request."""
        refuse_other_requests(self.choice.id, request)
        began = time.perf_counter()
        use_adapter = request.get("use_adapter", True)
        samples, frames = speak(self.loaded, self.codec, self.config, request["input"], voice_of(request), use_adapter)
        rate = snac.sampling_rate(self.config)
        log.info(
            "spoke %.2f s of audio (%d frames) in %.2f s", len(samples) / rate, frames, time.perf_counter() - began
        )
        return {"samples": samples, "sampling_rate": rate, "seconds": len(samples) / rate, "frames": frames}
