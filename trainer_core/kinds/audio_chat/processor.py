"""An audio-in chat model's processor (feature extractor + tokenizer + chat template)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from trainer_core.models.loading import ModelLoadError


def load_processor(path: Path, **kwargs: Any) -> Any:
    """The processor saved with the model in ``path`` (``AutoProcessor``), with a pad token (eos
    when missing); ``kwargs`` go to ``from_pretrained`` (``loading.remote_code``). Raises
    ModelLoadError naming the folder when there is no processor or it has no feature extractor."""
    from transformers import AutoProcessor, ProcessorMixin

    try:
        processor = AutoProcessor.from_pretrained(path, **kwargs)
    except (ImportError, OSError, ValueError, TypeError) as exc:
        raise ModelLoadError(f"could not load the processor of {path}: {exc}") from exc
    if not isinstance(processor, ProcessorMixin) or getattr(processor, "feature_extractor", None) is None:
        raise ModelLoadError(
            f"{path} has no audio feature extractor (preprocessor_config.json): an audio chat model folder needs "
            "the processor files saved beside the weights (processor.save_pretrained)"
        )
    if processor.tokenizer.pad_token is None:
        processor.tokenizer.pad_token = processor.tokenizer.eos_token
    return processor
