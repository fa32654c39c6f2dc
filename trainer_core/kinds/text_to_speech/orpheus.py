"""Orpheus-style text-to-speech models (``ORPHEUS``): a Llama-family causal LM whose tokenizer
carries the SNAC codec's audio codes as tokens (``family.is_orpheus``). Such a model speaks SNAC
codes, which only the SNAC codec's weights turn into audio (and its training targets come from
encoding clips with it); those weights are not on this machine, so the model is found, marked in
the picker and refused with the reason at Check, Start and chat, never trained as a text LM on
audio-code tokens it cannot hear."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Optional

from trainer_core.kinds.text_to_speech.family import ORPHEUS_REASON, ORPHEUS_VOCAB, is_orpheus, model_type
from trainer_core.model_kind import ModelKind, folder_config
from trainer_core.refusals import Refusal


def refusal(model_name: str) -> Refusal:
    """The refusal of Orpheus-style model ``model_name`` (field ``model_name``)."""
    return Refusal(f"model_name: {model_name}: {ORPHEUS_REASON}", fields=("model_name",), code="tts_codec_missing")


class OrpheusKind(ModelKind):
    """An Orpheus-style text-to-speech model: found by its folder, refused (see the module docstring)."""

    name = "orpheus"
    label = "text-to-speech (Orpheus, SNAC codec)"

    def claims_folder(self, folder: Path) -> bool:
        return is_orpheus(Path(folder), folder_config(Path(folder)))

    def picker_note(self, config: dict) -> str:
        """The note for a Llama config whose vocabulary holds SNAC's codes after Llama 3's (the folder's
        tokenizer says for sure: ``claims_folder``)."""
        if not (model_type(config) == "llama" and (config.get("vocab_size") or 0) >= ORPHEUS_VOCAB):
            return ""
        return " · text-to-speech (Orpheus: needs the SNAC codec, not on this machine)"

    def load_model(self, path: Path, request: Any, device: str) -> Any:
        raise refusal(request.model_name)

    def check_report(self, request: Any, folder: Optional[Path], tokenizer: Any, started: float) -> Any:
        from trainer_core.preflight.check import refused_report
        from trainer_core.preflight.report import Issue

        found = refusal(request.model_name)
        issue = Issue(level="error", code=found.code, message=str(found), fields=list(found.fields))
        return refused_report(request, [issue], started)


ORPHEUS = OrpheusKind()
