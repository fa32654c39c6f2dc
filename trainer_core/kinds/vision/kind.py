"""The image-and-text kind (``VISION``): each ``ModelKind`` method answered by this folder's
modules, imported when first used (the registry imports this module whenever a layer asks which
kind a model is; listing models must import neither torch nor transformers)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Optional

from trainer_core.kinds.vision.family import FAMILY_NAMES, VISION_MODELS, vision_family
from trainer_core.model_kind import ModelKind


class VisionKind(ModelKind):
    """A vision-language model (``AutoModelForImageTextToText``): rows of turns with ``<image>``
    markers and their images, read through the model's processor."""

    name = "vision"
    label = "vision-language"
    media = ("image",)
    suggestion = f"an image-and-text model (e.g. {', '.join(VISION_MODELS[:3])})"
    auto_class = "AutoModelForImageTextToText"

    def family(self, config: Any) -> Optional[str]:
        found = vision_family(config)
        return found.name if found is not None else None

    def picker_note(self, config: dict) -> str:
        if not config.get("vision_config"):  # the JSON alone: Start and the check ask ``family``
            return ""
        return f" · vision ({FAMILY_NAMES.get(config.get('model_type'), config.get('model_type'))})"

    def load_processor(self, path: Path, **kwargs: Any) -> Any:
        from trainer_core.kinds.vision.processor import load_processor

        return load_processor(path, **kwargs)

    def holds_media(self, dataset: Any) -> bool:
        from trainer_core.kinds.vision.rows import has_images

        return has_images(dataset)

    def keeps_media(self, request: Any, dataset: Any, kind: ModelKind) -> bool:
        from trainer_core.kinds.vision.data import reads_images

        return reads_images(request, dataset, kind is self)

    def media_rows(
        self, dataset: Any, fmt: Any, source: str, base: Optional[Path], first_row: int = 1
    ) -> tuple[Any, list[str]]:
        from trainer_core.kinds.vision.rows import normalize_vision
        from trainer_core.settings import get_settings

        return normalize_vision(dataset, fmt, source, base, get_settings().allowed_roots, first_row)

    def join_media(self, normalised: list[tuple], request: Any) -> list[tuple]:
        from trainer_core.kinds.vision.data import with_image_columns

        return with_image_columns(normalised, request)

    def prepare_data(self, request: Any, processor: Any) -> Any:
        from trainer_core.kinds.vision.prepare import prepare_vision_data

        return prepare_vision_data(request, processor, self)

    def data_note(self, family: Optional[str], data: Any) -> tuple[str, dict]:
        return f"; {family}: {data.images.line()}", {"vision": family, "images": data.images.images}

    def collator(self, processor: Any, request: Any) -> Any:
        from trainer_core.kinds.vision.collator import VisionCollator

        return VisionCollator(
            processor, request.max_seq_length, request.train_on_completions, request.vision_image_size
        )

    def lora_targets(self, model: Any, request: Any) -> Any:
        from trainer_core.kinds.vision.targets import vision_targets

        return vision_targets(model, request)

    def extra_parameters(self, config: Any) -> int:
        from trainer_core.kinds.vision.targets import tower_parameters

        return tower_parameters(config)

    def evaluator(self, processor: Any) -> Any:
        from trainer_core.kinds.vision.evaluate import VisionEvaluator

        return VisionEvaluator(processor)

    def chat_inputs(self, processor: Any, messages: list[dict], device: str) -> Optional[dict]:
        from trainer_core.kinds.vision.prompt import vision_inputs

        return vision_inputs(processor, messages, device)

    gguf_projector = True

    def gguf_problem(self, config: dict, converter: Path) -> Optional[str]:
        from trainer_core.kinds.vision.export import mmproj_problem

        return mmproj_problem(config, converter)

    def gguf_note(self, config: dict) -> Optional[str]:
        # llama-cpp-python evaluates text with 1-D positions; M-RoPE models need llama.cpp's mtmd
        return (
            f"{self.family(config)}: llama.cpp runs the language model with its projector (llama-mtmd-cli or "
            "llama-server with --mmproj); the answers are not compared here, only each file's metadata"
        )

    def check_line(self, request: Any, settings: Any, folder: Optional[Path]) -> Optional[str]:
        from trainer_core.kinds.vision.check import vision_summary

        return vision_summary(request, settings, folder, self)


VISION = VisionKind()
