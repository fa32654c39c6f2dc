"""The tokenizer of a model that is already on this machine, for the dataset check: never downloads,
never raises for a model that is missing or refused, and keeps the last few in memory.

Resolution follows ``models.loading.resolve_model_path`` without its network step: a folder path
(confined to ``settings.model_roots``), a Hub id in the Hugging Face cache, or, for the default
model, the bundled copy in ``settings.models_dir`` once it has been materialized, and before that the
bundled GGUF's tokenizer and config (``loading.materialize_default_tokenizer``: no weights).
"""

from __future__ import annotations

import logging
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any, Optional

from trainer_core.models import hub
from trainer_core.paths import PathNotAllowed, confine
from trainer_core.request.model import DEFAULT_MODEL

if TYPE_CHECKING:
    from trainer_core.settings import Settings

log = logging.getLogger(__name__)

CACHED_TOKENIZERS = 4  # tokenizers kept in memory (SmolLM2's takes ~10 MB)
BUNDLED_FOLDER = "SmolLM2-135M-Instruct"  # as written by models.loading.materialize_default_model


def local_model_folder(model_name: str, settings: Settings) -> Optional[Path]:
    """The folder on this machine that holds ``model_name`` (a folder path or a Hub id), or None
    when there is none without downloading, or the path lies outside ``settings.model_roots``."""
    name = model_name.strip()
    if not name:
        return None
    if hub.looks_like_path(name):
        try:
            folder = confine(name, settings.model_roots, "model_name")
        except PathNotAllowed:
            log.info("preview tokenizer: %s is outside the allowed folders", name[:120])
            return None
        return folder if (folder / "config.json").is_file() else None
    from huggingface_hub import snapshot_download
    from huggingface_hub.errors import LocalEntryNotFoundError

    try:
        return Path(snapshot_download(name, local_files_only=True))
    except (LocalEntryNotFoundError, FileNotFoundError, ValueError):  # ValueError: a malformed id
        pass
    bundled = Path(settings.models_dir) / BUNDLED_FOLDER
    if name != DEFAULT_MODEL:
        return None
    if (bundled / "config.json").is_file():
        return bundled
    from trainer_core.models.loading import materialize_default_tokenizer

    try:  # a fresh install: the bundled GGUF's tokenizer and config, without building the weights
        return materialize_default_tokenizer(settings.models_dir)
    except (OSError, ValueError) as exc:
        log.info("preview tokenizer: cannot read the bundled tokenizer (%s)", exc)
        return None


def load_preview_tokenizer(model_name: str, settings: Settings, default_template: str = "auto") -> Optional[Any]:
    """The transformers tokenizer of ``model_name`` (loaded like training loads it: ``loading.
    load_tokenizer``, so a template-less model gets ``default_template`` and a pad token), or None when the model
    is not on this machine, lies outside the allowed folders, or its tokenizer cannot be loaded.
    The last CACHED_TOKENIZERS tokenizers are kept by folder (failures are not kept, so a model that
    arrives later is found). The returned tokenizer is shared: do not change its settings."""
    folder = local_model_folder(model_name, settings)
    if folder is None:
        return None
    try:
        return _load(str(folder), default_template)
    except Exception as exc:  # a broken folder must not break the form; the Start check reports it
        log.info("preview tokenizer: cannot load %s (%s)", folder, exc)
        return None


@lru_cache(maxsize=CACHED_TOKENIZERS)
def _load(folder: str, default_template: str) -> Any:
    """``loading.load_tokenizer`` of a local folder, offline (``local_files_only``)."""
    from transformers import AutoTokenizer

    from trainer_core.models.templates import fill_template

    tokenizer = AutoTokenizer.from_pretrained(folder, local_files_only=True)
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    fill_template(tokenizer, default_template)
    return tokenizer
