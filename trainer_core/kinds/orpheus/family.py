"""Which folder holds an Orpheus-style text-to-speech model, from files alone (listing models imports
neither torch nor transformers): a ``llama`` causal LM (its own config.json, or a LoRA run's base's)
whose tokenizer adds at least ``SNAC_CODES`` ``<custom_token_N>`` tokens (tokenizer_config.json's
``added_tokens_decoder`` as older transformers save it, else tokenizer.json's ``added_tokens``)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Optional

from trainer_core.kinds.text_to_speech.family import model_type
from trainer_core.model_kind import adapter_base_config, folder_config

ORPHEUS_TOKEN = "<custom_token_"  # how Orpheus' tokenizer names its special and audio-code tokens
CODEBOOK_SIZE = 4096  # codes in each SNAC level
SNAC_CODES = 7 * CODEBOOK_SIZE  # SNAC 24 kHz: 7 codes a frame (1 + 2 + 4 over its 3 levels), 4096 each
ORPHEUS_VOCAB = 128_256 + SNAC_CODES  # Llama 3's vocabulary, then the codes: Orpheus' vocab_size is at least this
TTS_EXAMPLE = "canopylabs/orpheus-3b-0.1-pretrained"


def _contents(entries: Any) -> list[str]:
    """The ``content`` of each added-token entry in ``entries`` (a dict's values or a list)."""
    values = entries.values() if isinstance(entries, dict) else entries if isinstance(entries, list) else []
    return [entry.get("content", "") for entry in values if isinstance(entry, dict)]


def _read(path: Path, key: str) -> list[str]:
    """The added tokens' contents under ``key`` of the JSON file ``path`` ([] where unreadable)."""
    try:
        found = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return []
    return _contents(found.get(key)) if isinstance(found, dict) else []


def code_tokens(folder: Path) -> int:
    """How many ``<custom_token_N>`` tokens the tokenizer saved in ``folder`` adds."""
    for name, key in (("tokenizer_config.json", "added_tokens_decoder"), ("tokenizer.json", "added_tokens")):
        found = sum(1 for token in _read(folder / name, key) if token.startswith(ORPHEUS_TOKEN))
        if found >= SNAC_CODES:
            return found
    return 0


def is_orpheus(folder: Path, config: Optional[dict] = None) -> bool:
    """True when ``folder`` holds an Orpheus-style model (see the module docstring); ``config``: its
    config.json dict where the caller has read it (None: read here, or the adapter's base's)."""
    config = config or folder_config(folder) or adapter_base_config(folder) or {}
    if model_type(config) != "llama" or (config.get("vocab_size") or 0) < SNAC_CODES:
        return False
    return code_tokens(folder) >= SNAC_CODES
