"""The audio-in chat kind (``AUDIO_CHAT``): each ``ModelKind`` method answered by this folder's
modules, imported when first used (the registry imports this module whenever a layer asks which
kind a model is; listing models must import neither torch nor transformers)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Optional

from trainer_core.kinds.audio_chat.family import AUDIO_CHAT_MODELS, FAMILY_NAMES, audio_chat_family
from trainer_core.model_kind import ModelKind


class AudioChatKind(ModelKind):
    """An audio-in chat model (Qwen2-Audio: ``AutoModelForMultimodalLM``): rows of turns with
    ``<audio>`` markers and their clips, read through the model's processor (a Whisper feature
    extractor and the tokenizer); it answers in text."""

    name = "audio_chat"
    label = "audio chat"
    media = ("audio",)
    suggestion = f"an audio-in chat model (e.g. {', '.join(AUDIO_CHAT_MODELS)})"
    auto_class = "AutoModelForMultimodalLM"

    def family(self, config: Any) -> Optional[str]:
        found = audio_chat_family(config)
        return found.name if found is not None else None

    def picker_note(self, config: dict) -> str:
        found = audio_chat_family(config)
        return f" · audio chat ({FAMILY_NAMES[found.model_type]})" if found is not None else ""

    def load_processor(self, path: Path, **kwargs: Any) -> Any:
        from trainer_core.kinds.audio_chat.processor import load_processor

        return load_processor(path, **kwargs)

    def holds_media(self, dataset: Any) -> bool:
        from trainer_core.data.audio_rows import has_audio

        return has_audio(dataset)

    def keeps_media(self, request: Any, dataset: Any, kind: ModelKind) -> bool:
        from trainer_core.kinds.audio_chat.data import reads_audio

        return reads_audio(request, dataset, kind, self)

    def media_rows(
        self, dataset: Any, fmt: Any, source: str, base: Optional[Path], first_row: int = 1
    ) -> tuple[Any, list[str]]:
        from trainer_core.kinds.audio_chat.rows import normalize_audio_chat
        from trainer_core.settings import get_settings

        return normalize_audio_chat(dataset, fmt, source, base, get_settings().allowed_roots, first_row)

    def join_media(self, normalised: list[tuple], request: Any) -> list[tuple]:
        from trainer_core.kinds.audio_chat.data import with_audio_columns

        return with_audio_columns(normalised, request)

    def prepare_data(self, request: Any, processor: Any) -> Any:
        from trainer_core.kinds.audio_chat.prepare import prepare_audio_chat_data

        return prepare_audio_chat_data(request, processor, self)

    def data_note(self, family: Optional[str], data: Any) -> tuple[str, dict]:
        return f"; {family}: {data.audio.line()}", {"audio_chat": family, "clips": data.audio.clips}

    def collator(self, processor: Any, request: Any) -> Any:
        from trainer_core.kinds.audio_chat.prepare import audio_collator

        return audio_collator(processor, request)

    def extra_parameters(self, config: Any) -> int:
        from trainer_core.models.towers import outside_language_parameters

        return outside_language_parameters(config, self.auto_class)  # the audio tower and projector

    def evaluation(self) -> Any:
        from trainer_core.kinds.audio_chat.evaluation import AudioChatEvaluation

        return AudioChatEvaluation(self)

    def chat_inputs(self, processor: Any, messages: list[dict], device: str) -> Optional[dict]:
        from trainer_core.kinds.audio_chat.prompt import audio_chat_inputs

        return audio_chat_inputs(processor, messages, device)

    gguf_projector = True

    def gguf_problem(self, config: dict, converter: Path) -> Optional[str]:
        from trainer_core.kinds.audio_chat.export import projector_problem

        return projector_problem(config, converter)

    pipeline_tag = "audio-text-to-text"

    def card_usage(self, request: dict) -> Optional[list[str]]:
        from trainer_core.kinds.audio_chat.export import card_usage

        return card_usage(self.auto_class)

    def check_line(self, request: Any, settings: Any, folder: Optional[Path]) -> Optional[str]:
        from trainer_core.kinds.audio_chat.check import audio_chat_summary

        return audio_chat_summary(request, settings, folder, self)

    def media_tokens(self, folder: Optional[Path], rows: Any) -> Optional[list[int]]:
        from trainer_core.kinds.audio_chat.tokens import media_tokens

        return media_tokens(folder, rows)


AUDIO_CHAT = AudioChatKind()
