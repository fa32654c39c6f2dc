"""The text-to-speech kind (``TEXT_TO_SPEECH``): Sesame CSM, each ``ModelKind`` method answered by
this folder's modules, imported when first used (listing models must import neither torch nor
transformers). Orpheus-style models are their own kind (``kinds.orpheus``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Optional

from trainer_core.kinds.text_to_speech.family import TTS_MODELS, tts_family
from trainer_core.model_kind import ModelKind


class TextToSpeechKind(ModelKind):
    """A text-to-speech model (``CsmForConditionalGeneration``: Sesame CSM with its Mimi codec):
    (text, audio[, speaker]) rows read through its processor, trained to say the clip's codec
    frames after the text; serves ``POST /v1/audio/speech``."""

    name = "text_to_speech"
    label = "text-to-speech"
    media = ("audio",)
    suggestion = f"a text-to-speech model for (text, audio) rows (e.g. {TTS_MODELS[0]})"
    auto_class = "AutoModelForTextToWaveform"  # CsmForConditionalGeneration for a csm config
    serves = "speech"
    form_fields = ("speaker_column",)  # the form shows it for this kind alone
    evaluating = "scoring the held-out clips (reconstruction loss)"

    def family(self, config: Any) -> Optional[str]:
        return tts_family(config)

    def claims_folder(self, folder: Path) -> bool:
        """A LoRA run's folder (or checkpoint) has no config.json: its adapter's base model's says."""
        from trainer_core.model_kind import adapter_base_config

        return self.family(adapter_base_config(Path(folder)) or {}) is not None

    def picker_note(self, config: dict) -> str:
        family = self.family(config)
        return f" · text-to-speech ({family})" if family else ""

    def load_processor(self, path: Path, **kwargs: Any) -> Any:
        from trainer_core.kinds.text_to_speech.serve import load_processor

        return load_processor(path, **kwargs)

    def preview_rows(self, dataset: Any, request: Any, tokenizer: Any, source: str, base: Optional[Path] = None) -> Any:
        from trainer_core.kinds.text_to_speech.data import preview_rows

        return preview_rows(dataset, request, source, base)

    def prepare_data(self, request: Any, processor: Any) -> Any:
        from trainer_core.kinds.text_to_speech.data import prepare_tts_data

        return prepare_tts_data(request, processor)

    def data_note(self, family: Optional[str], data: Any) -> tuple[str, dict]:
        stats = data.stats
        return (
            f"; {family or 'speech'}: {stats.rows} clips, {stats.seconds:.1f} s of audio (longest "
            f"{stats.longest_seconds:.1f} s)",
            {"text_to_speech": family, "audio_seconds": stats.seconds, "longest_audio_seconds": stats.longest_seconds},
        )

    def lora_targets(self, model: Any, request: Any) -> Any:
        from trainer_core.kinds.text_to_speech.targets import tts_targets

        return tts_targets(model, request)

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
        from trainer_core.kinds.text_to_speech.trainer import build_tts_trainer

        return build_tts_trainer(request, model, data, output_dir, device, callbacks, run_name)

    def check_report(self, request: Any, folder: Optional[Path], tokenizer: Any, started: float) -> Any:
        from trainer_core.kinds.text_to_speech.check import tts_report

        return tts_report(request, folder, started, self)

    def estimates(self, request: Any, folder: Optional[Path], data: Any, plan: Any) -> dict[str, Any]:
        from trainer_core.kinds.text_to_speech.estimates import estimates

        return estimates(request, folder, data, plan)

    def evaluation(self) -> Any:
        from trainer_core.kinds.text_to_speech.evaluation import TtsEvaluation

        return TtsEvaluation()

    def load_server(self, choice: Any, models_dir: Path) -> Any:
        from trainer_core.kinds.text_to_speech.serve import TtsServer

        return TtsServer(choice, models_dir)

    def exporter(self, fmt: str) -> Any:
        if fmt != "merged":
            return None  # the adapter zip as for text; GGUF refused earlier (``gguf_problem``)
        from trainer_core.kinds.text_to_speech.export import export_merged

        return export_merged

    def gguf_problem(self, config: dict, converter: Path) -> Optional[str]:
        from trainer_core.kinds.text_to_speech.export import GGUF_REASON

        return GGUF_REASON

    pipeline_tag = "text-to-speech"

    def card_usage(self, request: dict) -> Optional[list[str]]:
        from trainer_core.kinds.text_to_speech.export import card_usage

        return card_usage(request)


TEXT_TO_SPEECH = TextToSpeechKind()
