"""Evaluating an Orpheus-style model after training (``ORPHEUS.evaluation()``): the text-to-speech
kind's evaluation (``kinds.text_to_speech.evaluation.TtsEvaluation``: the held-out clips, the tuned
model beside its base, and where a speech-to-text model is named, its speech transcribed back and
scored by WER / CER) with this kind's hooks: the clips read with speakers by name, the model and its
codec loaded as the inference worker loads them (``serve.OrpheusServer``; the base: the adapter
switched off, or a full fine-tune's base loaded beside it by ``LoadedModel.weights``), and the loss
the speech-token loss (``speech_loss``: mean cross-entropy in nats over the clip's SNAC code tokens
and the speech's end, as training scores it)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from trainer_core.kinds.text_to_speech.evaluation import TtsEvaluation

LOSS_ONLY = "speech-token loss only: no speech-to-text model named (speech_to_text_model) to transcribe the speech"


def speech_loss(server: Any, row: dict, use_adapter: bool = True) -> float:
    """The loss of ``server`` (``serve.OrpheusServer``) on ``row`` (``{"audio": a reference or float32
    samples at the codec's rate, "text", "speaker"}``): its clip encoded by the server's codec, the
    speech scored after its prompt, no gradients; ``use_adapter`` False: the base."""
    import torch

    from trainer_core.data.audio import read_audio
    from trainer_core.kinds.orpheus import codec as snac
    from trainer_core.kinds.orpheus.tokens import OrpheusTokens, prompt_ids, speech_ids
    from trainer_core.kinds.orpheus.trainer import SpeechCollator

    tokenizer, rate = server.loaded.tokenizer, snac.sampling_rate(server.config)
    ids = OrpheusTokens.of(tokenizer)
    samples = read_audio(row["audio"], sampling_rate=rate) if isinstance(row["audio"], str) else row["audio"]
    prompt = prompt_ids(ids, tokenizer, row["text"], row["speaker"])
    sequence = prompt + speech_ids(ids, snac.encode(server.codec, samples))
    batch = SpeechCollator(ids.pad)([{"input_ids": sequence, "prompt_length": len(prompt)}])
    with server.loaded.weights(use_adapter) as model, torch.inference_mode():
        return float(model(**{k: v.to(server.device) for k, v in batch.items()}).loss)


class OrpheusEvaluation(TtsEvaluation):
    """The Orpheus kind's evaluation (see the module docstring)."""

    LOSS_ONLY = LOSS_ONLY

    @staticmethod
    def held_out_rows(request: Any, roots: list[Path]) -> Any:
        from trainer_core.kinds.orpheus.data import held_out_rows

        return held_out_rows(request, roots)

    @staticmethod
    def load(choice: Any, models_dir: Path) -> Any:
        from trainer_core.kinds.orpheus.serve import OrpheusServer

        return OrpheusServer(choice, models_dir)

    def base_side(self, server: Any, choice: Any, models_dir: Path) -> tuple[Any, bool]:
        return server, False  # ``LoadedModel.weights(False)``: the adapter off, or a full fine-tune's base

    @staticmethod
    def loss(server: Any, row: dict, use_adapter: bool) -> float:
        return speech_loss(server, row, use_adapter)

    @staticmethod
    def say(server: Any, row: dict, use_adapter: bool) -> tuple[Any, int]:
        from trainer_core.kinds.orpheus import codec as snac
        from trainer_core.kinds.orpheus.serve import speak

        samples, _ = speak(server.loaded, server.codec, server.config, row["text"], row["speaker"], use_adapter)
        return samples, snac.sampling_rate(server.config)
