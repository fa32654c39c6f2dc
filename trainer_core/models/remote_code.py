"""Models that ship their own Python code (``trust_remote_code``).

A model folder whose ``config.json`` has an ``auto_map`` (e.g. ``{"AutoModelForCausalLM":
"modeling_x.XForCausalLM"}``) is built by running that code, as the server's user. transformers
refuses it unless ``trust_remote_code=True``; the studio adds a second key: the server's owner must
allow it (``STUDIO_ALLOW_REMOTE_CODE=1``), and then a request must ask for it
(``trust_remote_code``). Training, the check, chat and export all load through ``load_kwargs``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

SWITCH = "STUDIO_ALLOW_REMOTE_CODE=1"


class RemoteCodeError(ValueError):
    """A model needs its own code and the request or the server does not allow it (the message
    names ``trust_remote_code`` and the fix)."""


def auto_map(folder: Path) -> dict[str, Any]:
    """The ``auto_map`` of ``folder``'s config.json ({} when none, or no readable config)."""
    try:
        config = json.loads((Path(folder) / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    mapping = config.get("auto_map") if isinstance(config, dict) else None
    return mapping if isinstance(mapping, dict) else {}


def load_kwargs(folder: Path, asked: bool, allowed: bool) -> dict[str, Any]:
    """``{"trust_remote_code": True}`` for a model that ships code when the request ``asked`` and
    the server ``allowed``; ``{}`` for a model without code (``asked`` then changes nothing).
    Raises RemoteCodeError when the model ships code and either key is missing, naming what it
    would run."""
    mapping = auto_map(folder)
    if not mapping:
        return {}
    code = ", ".join(sorted({str(v) if isinstance(v, str) else str(v[0]) for v in mapping.values()}))
    if not allowed:
        raise RemoteCodeError(
            f"trust_remote_code: {Path(folder).name} ships its own code ({code}) and this server does not run a "
            f"model's code; its owner can allow it with {SWITCH}, or pick a model transformers knows"
        )
    if not asked:
        raise RemoteCodeError(
            f"trust_remote_code: {Path(folder).name} ships its own code ({code}); turn trust_remote_code on if "
            "you trust that code (it runs on the server), or pick a model transformers knows"
        )
    return {"trust_remote_code": True}
