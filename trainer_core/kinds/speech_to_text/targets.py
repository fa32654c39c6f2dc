"""LoRA targets of an encoder-decoder speech model (Whisper): the shared rule
(``models.targets.resolve_targets``: every linear projection of the blocks, by the request's
attention / MLP switches) applied to both stacks of blocks. The shared rule finds one stack
(``find_blocks``: the encoder, whose length is ``num_hidden_layers``); the decoder's blocks
(self-attention, cross-attention ``encoder_attn``, ``fc1`` / ``fc2``) are resolved the same way on
the model's ``get_decoder()`` and added by their full paths (``Targets.decoder``)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Optional

from trainer_core.models.targets import ALL_LINEAR, Targets, resolve_targets, strip_peft_prefix


def _path_of(model: Any, part: Any) -> str:
    """The path of submodule ``part`` in ``model`` (as the base model names it)."""
    return strip_peft_prefix(next(name for name, module in model.named_modules() if module is part))


def speech_targets(model: Any, request: Any) -> Optional[Targets]:
    """With ``["all-linear"]``: the encoder's and the decoder's block projections (both by the
    shared rule and switches); None for an explicit ``target_modules`` list (PEFT matches its names
    in both stacks, as for any model) or a model without ``get_decoder``. Raises TargetError as
    ``resolve_targets``."""
    if list(request.target_modules) != [ALL_LINEAR] or not hasattr(model, "get_decoder"):
        return None
    switches = (request.finetune_attention_modules, request.finetune_mlp_modules, request.finetune_language_layers)
    first = resolve_targets(model, [ALL_LINEAR], *switches)
    decoder = model.get_decoder()
    prefix = _path_of(model, decoder)
    if first.blocks.startswith(prefix + "."):  # the shared rule found the decoder's blocks: nothing to add
        return first
    second = resolve_targets(decoder, [ALL_LINEAR], *switches)
    paths = tuple(f"{prefix}.{second.blocks}.{i}.{m}" for i in range(second.layers) for m in second.modules)
    return replace(first, decoder=paths)
