"""LoRA targets of a CSM model: the shared rule (``models.targets.resolve_targets``: the request's
``target_modules`` and attention / MLP switches) applied to its two transformers, the backbone
(``backbone_model``: text and the first codebook) and the depth decoder (``depth_decoder.model``:
the other codebooks), each found where the model has it (``get_input_embeddings``'s owner is
never assumed: the stacks are the modules whose config names their layer count), and both given
as full paths, so that a name such as ``q_proj`` never reaches the codec (Mimi's own transformer
has projections of the same names; the codec is frozen and never trained)."""

from __future__ import annotations

from typing import Any

from trainer_core.models.targets import TargetError, Targets, resolve_targets, strip_peft_prefix

STACKS = ("backbone_model", "depth_decoder.model")  # CsmForConditionalGeneration's two transformers
CODEC = "codec_model"  # the audio codec (Mimi): frozen


def _stack(model: Any, path: str) -> Any:
    """The submodule ``path`` of ``model`` (a PEFT wrapper's base model's); TargetError when absent."""
    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    try:
        return base.get_submodule(path)
    except AttributeError:
        raise TargetError(f"target_modules: this CSM model has no {path} to adapt") from None


def tts_targets(model: Any, request: Any) -> Targets:
    """The backbone's block projections (``blocks``, ``modules``) and the depth decoder's
    (``decoder``: full paths) that ``request`` chooses. Raises TargetError as ``resolve_targets``
    (names that match neither stack, both switches off)."""
    switches = (request.finetune_attention_modules, request.finetune_mlp_modules, request.finetune_language_layers)
    names = list(request.target_modules)
    backbone = resolve_targets(_stack(model, STACKS[0]), names, *switches)
    depth = resolve_targets(_stack(model, STACKS[1]), names, *switches)
    decoder = tuple(f"{STACKS[1]}.{depth.blocks}.{i}.{m}" for i in range(depth.layers) for m in depth.modules)
    return Targets(
        blocks=f"{STACKS[0]}.{strip_peft_prefix(backbone.blocks)}",
        layers=backbone.layers,
        modules=backbone.modules,
        kinds=backbone.kinds,
        decoder=decoder,
    )


def freeze_codec(model: Any) -> int:
    """Freeze the codec's weights in ``model`` (a full fine-tune trains everything else); returns
    how many parameters were frozen."""
    codec = _stack(model, CODEC)
    params = list(codec.parameters())
    for param in params:
        param.requires_grad_(False)
    return len(params)
