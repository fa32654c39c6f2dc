"""A speech-to-text model's processor (feature extractor + tokenizer), and what its config says
about the decoder's length."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from trainer_core.models.loading import ModelLoadError

DEFAULT_TARGET_POSITIONS = 448  # Whisper's max_target_positions
DEFAULT_SOURCE_POSITIONS = 1500  # Whisper's max_source_positions: 30 s of 10 ms frames, halved by its conv


def load_processor(path: Path, **kwargs: Any) -> Any:
    """The ``WhisperProcessor`` (``AutoProcessor``) saved with the model in ``path``; ``kwargs`` go
    to ``from_pretrained``. Raises ModelLoadError naming the folder when it has no feature extractor
    or tokenizer (``preprocessor_config.json``, the tokenizer files)."""
    from transformers import AutoProcessor

    try:
        processor = AutoProcessor.from_pretrained(path, **kwargs)
    except (ImportError, OSError, ValueError, TypeError) as exc:
        raise ModelLoadError(f"could not load the processor of {path}: {exc}") from exc
    if getattr(processor, "feature_extractor", None) is None or getattr(processor, "tokenizer", None) is None:
        raise ModelLoadError(
            f"{path} has no speech processor (preprocessor_config.json and the tokenizer files): a speech-to-text "
            "model folder needs the processor saved beside the weights (processor.save_pretrained)"
        )
    if processor.tokenizer.pad_token is None:
        processor.tokenizer.pad_token = processor.tokenizer.eos_token
    return processor


def folder_target_positions(folder: Path) -> int:
    """The decoder's longest sequence (``max_target_positions``) of the model saved in ``folder``."""
    from trainer_core.model_kind import folder_config

    value = (folder_config(folder) or {}).get("max_target_positions")
    return value if isinstance(value, int) and value > 0 else DEFAULT_TARGET_POSITIONS


def folder_source_positions(folder: Path) -> int:
    """The encoder's frames for one clip (``max_source_positions``) of the model saved in ``folder``:
    Whisper pads every clip to its window (the feature extractor's ``chunk_length``), so each clip
    costs this many encoder positions whatever its length (1500 for 30 s)."""
    from trainer_core.model_kind import folder_config

    value = (folder_config(folder) or {}).get("max_source_positions")
    return value if isinstance(value, int) and value > 0 else DEFAULT_SOURCE_POSITIONS


def max_target_positions(request: Any) -> int:
    """``folder_target_positions`` of ``request``'s model (already on this machine: the worker has
    loaded it). Raises ModelLoadError as ``resolve_model_path``."""
    from trainer_core.models.loading import resolve_model_path
    from trainer_core.settings import get_settings

    token = request.hf_token.get_secret_value() if request.hf_token else None
    return folder_target_positions(resolve_model_path(request.model_name, token, get_settings().models_dir))
