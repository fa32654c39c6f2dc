"""A vision-language model's processor (image processor + tokenizer + chat template), loaded so
that it works where torchvision does not.

transformers 5 builds the processors of Qwen2-VL, Qwen2.5-VL and SmolVLM only together with their
video processor, and every video processor needs torchvision. A CPU-only torch (``2.13.0+cpu``)
has no matching torchvision wheel (the PyPI one links CUDA's libraries), so ``AutoProcessor``
raises ImportError there. Images need only the image processor, which has a PIL backend: such a
processor is then built without its video processor (``images_only``); videos are not trained
here (issue scope), and a video in the data is refused by row before it gets here.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

from trainer_core.models.loading import ModelLoadError

log = logging.getLogger(__name__)


def load_processor(path: Path, **kwargs: Any) -> Any:
    """The processor saved with the model in ``path`` (``AutoProcessor``), with a pad token (eos
    when missing); ``kwargs`` go to ``from_pretrained`` (``loading.remote_code``). Without
    torchvision, a processor that insists on a video processor is built without one
    (``images_only``). Raises ModelLoadError naming the folder when there is no processor."""
    from transformers import AutoProcessor, ProcessorMixin

    try:
        processor = AutoProcessor.from_pretrained(path, **kwargs)
    except (ImportError, OSError, ValueError, TypeError) as exc:
        # torchvision missing: ImportError from the model's folder, OSError from a saved processor's
        if "torchvision" not in str(exc).lower() and "video processor" not in str(exc).lower():
            raise ModelLoadError(f"could not load the processor of {path}: {exc}") from exc
        processor = images_only(path, **kwargs)
    if not isinstance(processor, ProcessorMixin) or getattr(processor, "image_processor", None) is None:
        raise ModelLoadError(
            f"{path} has no image processor (preprocessor_config.json): a vision-language model folder needs "
            "the processor files saved beside the weights (processor.save_pretrained)"
        )
    tokenizer = processor.tokenizer
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    return processor


def images_only(path: Path, **kwargs: Any) -> Any:
    """The model's processor class built from its image processor and tokenizer with no video
    processor (see the module docstring). Raises ModelLoadError when the class cannot be built so."""
    import transformers
    from transformers import AutoConfig, AutoImageProcessor, AutoTokenizer
    from transformers.models.auto.processing_auto import PROCESSOR_MAPPING_NAMES

    saved = Path(path) / "processor_config.json"  # a saved processor names its class
    name = json.loads(saved.read_text(encoding="utf-8")).get("processor_class") if saved.is_file() else None
    if not name:
        name = PROCESSOR_MAPPING_NAMES.get(AutoConfig.from_pretrained(path, **kwargs).model_type, "")
    base = getattr(transformers, name or "", None)
    if base is None:
        raise ModelLoadError(f"could not load the processor of {path}: it needs torchvision, which is not installed")

    class ImagesOnly(base):  # the processor without its video processor (built, used and saved so)
        @classmethod
        def get_attributes(cls) -> list[str]:
            return [name for name in super().get_attributes() if name != "video_processor"]

    ImagesOnly.__name__ = ImagesOnly.__qualname__ = base.__name__
    tokenizer = AutoTokenizer.from_pretrained(path, **kwargs)
    parts = {"image_processor": AutoImageProcessor.from_pretrained(path, **kwargs), "tokenizer": tokenizer}
    log.info("%s: built %s without its video processor (torchvision is not installed)", path, base.__name__)
    try:
        return ImagesOnly(**parts, chat_template=tokenizer.chat_template)
    except (TypeError, ValueError) as exc:
        raise ModelLoadError(f"could not load the processor of {path} without torchvision: {exc}") from exc
