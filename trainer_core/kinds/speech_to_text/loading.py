"""A speech-to-text model's processor (feature extractor + tokenizer), and what its config says
about the decoder's length."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Optional

from trainer_core.models.loading import ModelLoadError

DEFAULT_TARGET_POSITIONS = 448  # Whisper's max_target_positions


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


def max_target_positions(request: Any) -> int:
    """``folder_target_positions`` of ``request``'s model (already on this machine: the worker has
    loaded it). Raises ModelLoadError as ``resolve_model_path``."""
    from trainer_core.models.loading import resolve_model_path
    from trainer_core.settings import get_settings

    token = request.hf_token.get_secret_value() if request.hf_token else None
    return folder_target_positions(resolve_model_path(request.model_name, token, get_settings().models_dir))


def adapter_base_config(folder: Path) -> Optional[dict]:
    """The config.json dict of the base model of the LoRA adapter saved in ``folder`` (its
    ``adapter_config.json``'s ``base_model_name_or_path``: a local folder, or a Hub id in the local
    Hub cache); None for a folder without an adapter or a base not on this machine. Files only."""
    import json

    from trainer_core.model_kind import folder_config

    if (folder / "config.json").is_file():
        return None  # a whole model: its own config says
    try:
        base = json.loads((folder / "adapter_config.json").read_text(encoding="utf-8")).get("base_model_name_or_path")
    except (OSError, ValueError, AttributeError):
        return None
    if not isinstance(base, str) or not base:
        return None
    local = Path(base).expanduser()
    if local.is_absolute() or base.startswith("."):
        return folder_config(local) if local.is_dir() else None
    from huggingface_hub import try_to_load_from_cache

    cached = try_to_load_from_cache(base, "config.json")
    return folder_config(Path(cached).parent) if isinstance(cached, str) else None
