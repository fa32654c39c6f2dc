"""The Orpheus-style text-to-speech kind (``ORPHEUS``): a Llama-family causal LM whose tokenizer
carries the SNAC codec's audio codes as tokens (``family.is_orpheus``), trained on the
text-to-speech kind's (text, audio[, speaker]) rows to say each clip's SNAC codes after its text,
where the codec's weights are at hand (the request's ``audio_codec``: ``codec``), refused with the
reason where not. Each ``ModelKind`` method is answered by this folder's modules, imported when
first used (listing models must import neither torch nor transformers); the model itself loads as
a text LM (``models.loading``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Optional

from trainer_core.kinds.orpheus.codec import CODEC_KEY
from trainer_core.kinds.orpheus.family import ORPHEUS_VOCAB, TTS_EXAMPLE, is_orpheus
from trainer_core.kinds.text_to_speech.family import model_type
from trainer_core.model_kind import ModelKind


class OrpheusKind(ModelKind):
    """An Orpheus-style text-to-speech model (see the module docstring); serves ``POST
    /v1/audio/speech``."""

    name = "orpheus"
    label = "text-to-speech (Orpheus, SNAC codec)"
    media = ("audio",)
    suggestion = f"an Orpheus-style text-to-speech model with its SNAC codec (e.g. {TTS_EXAMPLE})"
    serves = "speech"
    form_fields = ("speaker_column", "audio_codec")
    evaluating = "scoring the held-out clips (speech-token loss)"

    def claims_folder(self, folder: Path) -> bool:
        return is_orpheus(Path(folder))

    def picker_note(self, config: dict) -> str:
        """The note for a Llama config whose vocabulary holds SNAC's codes after Llama 3's (the folder's
        tokenizer says for sure: ``claims_folder``)."""
        if not (model_type(config) == "llama" and (config.get("vocab_size") or 0) >= ORPHEUS_VOCAB):
            return ""
        return " · text-to-speech (Orpheus, SNAC codec)"

    def preview_rows(self, dataset: Any, request: Any, tokenizer: Any, source: str, base: Optional[Path] = None) -> Any:
        """The text-to-speech preview of the rows (players, durations), speakers as the names a
        prompt says (``data.speaker_name``)."""
        from trainer_core.kinds.orpheus.data import speaker_name
        from trainer_core.kinds.text_to_speech.data import preview_rows

        return preview_rows(dataset, request, source, base, speaker_name, "no speaker name")

    def prepare_data(self, request: Any, processor: Any) -> Any:
        from trainer_core.kinds.orpheus.data import prepare_orpheus_data

        processor.init_kwargs[CODEC_KEY] = request.audio_codec  # saved with the run's tokenizer
        return prepare_orpheus_data(request, processor)

    def data_note(self, family: Optional[str], data: Any) -> tuple[str, dict]:
        stats = data.stats
        return (
            f"; Orpheus: {stats.rows} clips, {stats.seconds:.1f} s of audio (longest {stats.longest_seconds:.1f} s)",
            {
                "text_to_speech": "Orpheus",
                "audio_seconds": stats.seconds,
                "longest_audio_seconds": stats.longest_seconds,
            },
        )

    def build_trainer(
        self,
        request: Any,
        model: Any,
        data: Any,
        output_dir: Path,
        device: str,
        callbacks: list[Any],
        run_name: Optional[str] = None,
    ) -> Any:
        from trainer_core.kinds.orpheus.trainer import build_orpheus_trainer

        return build_orpheus_trainer(request, model, data, output_dir, device, callbacks, run_name)

    def evaluation(self) -> Any:
        from trainer_core.kinds.orpheus.evaluation import OrpheusEvaluation

        return OrpheusEvaluation()

    def load_server(self, choice: Any, models_dir: Path) -> Any:
        from trainer_core.kinds.orpheus.serve import OrpheusServer

        return OrpheusServer(choice, models_dir)

    def exporter(self, fmt: str) -> Any:
        """The text path's exporter of ``fmt`` whose card says how the model speaks (``export``)."""
        from trainer_core.export.worker import exporter
        from trainer_core.kinds.orpheus.export import with_speech

        return with_speech(exporter(fmt))

    def check_report(self, request: Any, folder: Optional[Path], tokenizer: Any, started: float) -> Any:
        from trainer_core.kinds.orpheus.check import orpheus_report

        return orpheus_report(request, folder, started, self)


ORPHEUS = OrpheusKind()
