"""Parameters of a model outside its language model (a vision or audio tower and its projector),
counted on the model built on the ``meta`` device: no weights read, no memory taken."""

from __future__ import annotations

from typing import Any


def outside_language_parameters(config: Any, auto_class: str) -> int:
    """Parameters of the model of ``config`` (built with transformers' ``auto_class``, e.g.
    ``AutoModelForImageTextToText``) outside its language model and output embeddings: a tower and
    its projector. 0 for the config.json dict or a config transformers cannot build."""
    if isinstance(config, dict):
        return 0
    import torch
    import transformers

    try:
        with torch.device("meta"):
            model = getattr(transformers, auto_class).from_config(config)
    except (ValueError, KeyError, TypeError, ImportError, AttributeError):
        return 0
    language = model.get_decoder() if hasattr(model, "get_decoder") else None
    inside = {id(p) for p in language.parameters()} if language is not None else set()
    inside |= {id(p) for p in model.get_output_embeddings().parameters()} if model.get_output_embeddings() else set()
    return sum(p.numel() for p in model.parameters() if id(p) not in inside)
