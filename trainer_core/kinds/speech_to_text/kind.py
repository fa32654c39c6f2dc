"""The speech-to-text kind (``SPEECH_TO_TEXT``): Whisper, each ``ModelKind`` method answered by this
folder's modules, imported when first used (listing models must import neither torch nor
transformers)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Optional

from trainer_core.model_kind import ModelKind

FAMILIES = {"whisper": "Whisper"}  # model_type -> display name
SPEECH_MODELS = ("openai/whisper-tiny", "openai/whisper-small", "openai/whisper-large-v3-turbo")


def _model_type(config: Any) -> Optional[str]:
    return config.get("model_type") if isinstance(config, dict) else getattr(config, "model_type", None)


class SpeechToTextKind(ModelKind):
    """A speech-to-text model (``AutoModelForSpeechSeq2Seq``: Whisper): (audio, transcript) rows
    read through its processor, trained as sequence-to-sequence."""

    name = "speech_to_text"
    label = "speech-to-text"
    media = ("audio",)
    suggestion = f"a speech-to-text model for (audio, transcript) rows (e.g. {', '.join(SPEECH_MODELS[:2])})"
    auto_class = "AutoModelForSpeechSeq2Seq"
    serves = "transcriptions"
    form_fields = ("language", "task", "return_timestamps")  # Whisper's own: the form shows them for this kind alone

    def family(self, config: Any) -> Optional[str]:
        return FAMILIES.get(_model_type(config) or "")

    def claims_folder(self, folder: Path) -> bool:
        """A LoRA run's folder (or checkpoint) has no config.json: its adapter's base model's says."""
        from trainer_core.model_kind import adapter_base_config

        return self.family(adapter_base_config(Path(folder)) or {}) is not None

    def exporter(self, fmt: str) -> Any:
        if fmt != "merged":
            return None  # the adapter zip as for text; GGUF refused earlier (``gguf_problem``)
        from trainer_core.kinds.speech_to_text.export import export_merged

        return export_merged

    def gguf_problem(self, config: dict, converter: Path) -> Optional[str]:
        from trainer_core.kinds.speech_to_text.export import GGUF_REASON

        return GGUF_REASON

    pipeline_tag = "automatic-speech-recognition"

    def card_usage(self, request: dict) -> Optional[list[str]]:
        from trainer_core.kinds.speech_to_text.export import card_usage

        return card_usage(request)

    def evaluation(self) -> Any:
        from trainer_core.kinds.speech_to_text.evaluation import SpeechEvaluation

        return SpeechEvaluation()

    def load_server(self, choice: Any, models_dir: Path) -> Any:
        from trainer_core.kinds.speech_to_text.serve import SpeechServer

        return SpeechServer(choice, models_dir)

    def picker_note(self, config: dict) -> str:
        family = self.family(config)
        return f" · speech-to-text ({family})" if family else ""

    def load_processor(self, path: Path, **kwargs: Any) -> Any:
        from trainer_core.kinds.speech_to_text.loading import load_processor

        return load_processor(path, **kwargs)

    def preview_rows(self, dataset: Any, request: Any, tokenizer: Any, source: str, base: Optional[Path] = None) -> Any:
        from trainer_core.kinds.speech_to_text.data import preview_rows

        return preview_rows(dataset, request, source, base)

    def prepare_data(self, request: Any, processor: Any) -> Any:
        from trainer_core.kinds.speech_to_text.data import prepare_speech_data
        from trainer_core.kinds.speech_to_text.loading import max_target_positions

        return prepare_speech_data(request, processor, max_target_positions(request))

    def data_note(self, family: Optional[str], data: Any) -> tuple[str, dict]:
        stats = data.stats
        return (
            f"; {family or 'speech'}: {stats.rows} clips, {stats.seconds:.1f} s of audio (longest {stats.longest_seconds:.1f} s)",
            {"speech_to_text": family, "audio_seconds": stats.seconds, "longest_audio_seconds": stats.longest_seconds},
        )

    def lora_targets(self, model: Any, request: Any) -> Any:
        from trainer_core.kinds.speech_to_text.targets import speech_targets

        return speech_targets(model, request)

    def check_report(self, request: Any, folder: Optional[Path], tokenizer: Any, started: float) -> Any:
        from trainer_core.kinds.speech_to_text.check import speech_report

        return speech_report(request, folder, started, self)

    def estimates(self, request: Any, folder: Optional[Path], data: Any, plan: Any) -> dict[str, Any]:
        from trainer_core.kinds.speech_to_text.estimates import estimates

        return estimates(request, folder, data, plan)

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
        from trainer_core.kinds.speech_to_text.trainer import build_speech_trainer

        return build_speech_trainer(request, model, data, output_dir, device, callbacks, run_name)


SPEECH_TO_TEXT = SpeechToTextKind()
