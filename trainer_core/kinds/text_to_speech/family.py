"""Which text-to-speech model a config or folder holds, from files alone (listing models imports
neither torch nor transformers): Sesame CSM by ``model_type``; an Orpheus-style model (a Llama-family
causal LM whose tokenizer carries SNAC's audio codes as ``<custom_token_N>`` tokens) by its
tokenizer files."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Optional

FAMILIES = {"csm": "CSM"}  # model_type -> display name
TTS_MODELS = ("sesame/csm-1b", "unsloth/csm-1b")
ORPHEUS_TOKEN = "<custom_token_"  # how Orpheus' tokenizer names its audio-code tokens
SNAC_CODES = 7 * 4096  # SNAC 24 kHz: 7 codes a frame (1 + 2 + 4 over its 3 levels), 4096 each
ORPHEUS_VOCAB = 128_256 + SNAC_CODES  # Llama 3's vocabulary, then the codes: Orpheus' vocab_size is at least this
SNAC_CODEC = "hubertsiuzdak/snac_24khz"
ORPHEUS_REASON = (
    f"this is an Orpheus-style text-to-speech model (a causal LM speaking SNAC codes): it needs the SNAC codec "
    f"{SNAC_CODEC}, not on this machine; train Sesame CSM here instead (e.g. {TTS_MODELS[0]})"
)


def model_type(config: Any) -> Optional[str]:
    """``model_type`` of a ``PretrainedConfig`` or a config.json dict (None for neither)."""
    return config.get("model_type") if isinstance(config, dict) else getattr(config, "model_type", None)


def tts_family(config: Any) -> Optional[str]:
    """ "CSM" for a CSM config; None otherwise."""
    return FAMILIES.get(model_type(config) or "")


def _added_tokens(folder: Path) -> list[str]:
    """The added tokens' contents in ``folder``'s tokenizer_config.json ([] where unreadable)."""
    try:
        found = json.loads((folder / "tokenizer_config.json").read_text(encoding="utf-8")).get("added_tokens_decoder")
    except (OSError, ValueError, AttributeError):
        return []
    if not isinstance(found, dict):
        return []
    return [entry.get("content", "") for entry in found.values() if isinstance(entry, dict)]


def is_orpheus(folder: Path, config: Optional[dict]) -> bool:
    """True when ``folder`` (config.json dict ``config``) holds an Orpheus-style model: a ``llama``
    causal LM whose tokenizer adds at least ``SNAC_CODES`` ``<custom_token_N>`` tokens."""
    if model_type(config or {}) != "llama":
        return False
    return sum(1 for token in _added_tokens(folder) if token.startswith(ORPHEUS_TOKEN)) >= SNAC_CODES
