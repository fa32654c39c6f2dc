"""Which parts of a loaded model get LoRA adapters: found in the model, never taken from a list of
one family's names.

The default ``target_modules`` (``["all-linear"]``, PEFT's own name for it) means every linear
projection inside the transformer blocks of whatever model is loaded: attention and MLP, fused ones
included (``qkv_proj``, ``gate_up_proj``, GPT-2's ``Conv1D`` ``c_attn``, Falcon's
``query_key_value``), never ``lm_head``, the embeddings or an MoE router. Experts kept as 3-D
parameters (Qwen3-MoE, Mixtral and gpt-oss in transformers 5) are adapted through PEFT's
``target_parameters`` (``lora.ParamWrapper``), which needs ``lora_dropout`` 0. Every block is
walked (``block_walk``): mixed dense + MoE models adapt their dense MLPs and shared experts too.

The blocks are the ``nn.ModuleList`` with ``config.num_hidden_layers`` entries (the language
model's, not a vision tower's). PEFT gets an exact regular expression over the blocks' module
paths (a full match, ``peft.tuners.tuners_utils.check_target_module_exists``), so GPT-2's
``attn.c_proj`` and ``mlp.c_proj`` stay apart when only one kind is chosen.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Optional

from trainer_core.models.block_walk import BlockLayout, expert_count, linear, peft_rewritten_names, walk_blocks

ALL_LINEAR = "all-linear"


class TargetError(ValueError):
    """``target_modules`` (or the structure switches) select nothing, or less than their names say;
    the message names the field and the projections the model has."""


@dataclass(frozen=True)
class Targets:
    """What gets adapters in one model.

    ``modules``: the adapted projections as paths inside a block (``self_attn.q_proj``), attention
    first; ``kinds``: ``"attention"`` or ``"mlp"`` for each; ``parameters``: 3-D expert parameters
    inside a block (``mlp.experts.gate_up_proj``); ``blocks``: the blocks' path (``model.layers``)
    and ``layers`` their count; ``spread``: the blocks holding each of ``modules`` then
    ``parameters`` (empty: every block); ``count``: adapted modules and parameters in the whole
    model; ``groups``: a model with experts' groups with their block counts (``"dense MLP in 1
    layer"``); ``via_parameters``: ``modules`` PEFT gets as ``target_parameters`` (their
    ``weight``: ``block_walk.peft_rewritten_names``).
    ``explicit``: the names of a user's own list (PEFT gets them as they are); ``outside``: modules
    outside the blocks such a list names (``lm_head``)."""

    blocks: str
    layers: int
    modules: tuple[str, ...]
    kinds: tuple[str, ...]
    parameters: tuple[str, ...] = ()
    explicit: tuple[str, ...] = ()
    outside: tuple[str, ...] = ()
    vision: tuple[str, ...] = ()  # full module paths in a vision tower and its projector
    decoder: tuple[str, ...] = ()  # full module paths in an encoder-decoder model's other blocks (Whisper's decoder)
    spread: tuple[int, ...] = ()
    groups: tuple[str, ...] = ()
    via_parameters: tuple[str, ...] = ()

    @property
    def count(self) -> int:
        extra = len(self.outside) + len(self.vision) + len(self.decoder)
        inside = sum(self.spread) if self.spread else self.layers * (len(self.modules) + len(self.parameters))
        return inside + extra

    def peft_target_modules(self) -> Any:
        """What PEFT gets as ``target_modules``: a user's list as it is, else a full-match pattern
        over the chosen block paths (None when only expert parameters are adapted)."""
        if self.explicit:
            return list(self.explicit)
        patterns = [re.escape(path) for path in (*self.vision, *self.decoder)]
        modules = [m for m in self.modules if m not in self.via_parameters]
        if modules:
            names = "|".join(re.escape(m) for m in modules)
            patterns.insert(0, rf"{re.escape(self.blocks)}\.\d+\.(?:{names})")
        if not patterns:
            return None
        return rf"^{patterns[0]}$" if len(patterns) == 1 else rf"^(?:{'|'.join(patterns)})$"

    def peft_target_parameters(self) -> Optional[list[str]]:
        """PEFT's ``target_parameters`` (matched as a suffix of ``module.parameter``) or None: the
        experts' parameters and the ``weight`` of each of ``via_parameters``."""
        return [*self.parameters, *(f"{m}.weight" for m in self.via_parameters)] or None

    def summary(self) -> str:
        """One line for the check and the run's summary, e.g. ``7 per block x 30 blocks: ...``."""
        parts = list(self.modules) + [f"{p} (experts)" for p in self.parameters]
        line = f"{len(parts)} per block x {self.layers} blocks: {', '.join(parts)}" if parts else "no language layers"
        if self.groups:  # blocks differ (dense and MoE layers): each group with the blocks holding it
            line = f"across {self.layers} blocks: {', '.join(self.groups)} ({', '.join(parts)})"
        line += f"; and {', '.join(self.outside)}" if self.outside else ""
        line += f"; and {len(self.decoder)} in the decoder's blocks" if self.decoder else ""
        return line + (f"; and {len(self.vision)} in the vision tower and projector" if self.vision else "")


def _layer_count(config: Any) -> Optional[int]:
    config = getattr(config, "text_config", None) or config
    for name in ("num_hidden_layers", "n_layer", "num_layers"):
        value = getattr(config, name, None)
        if isinstance(value, int) and value > 0:
            return value
    return None


def find_blocks(model: Any) -> tuple[str, Any]:
    """The transformer blocks of ``model``: (path, ``nn.ModuleList``). The list whose length is the
    config's layer count, outside any vision tower; else the longest ModuleList of modules that
    hold a linear layer. Raises TargetError when the model has none."""
    import torch.nn as nn

    layers = _layer_count(getattr(model, "config", None))
    lists = [
        (name, module)
        for name, module in model.named_modules()
        if isinstance(module, nn.ModuleList) and len(module) and any(linear(m) for m in module[0].modules())
    ]
    lists = [(n, m) for n, m in lists if not any(w in n for w in ("vision", "visual", "image", "audio"))] or lists
    matching = [(n, m) for n, m in lists if len(m) == layers]
    chosen = matching or sorted(lists, key=lambda item: -len(item[1]))
    if not chosen:
        raise TargetError("target_modules: this model has no transformer blocks with linear layers to adapt")
    name, blocks = chosen[0]
    return strip_peft_prefix(name), blocks


def strip_peft_prefix(name: str) -> str:
    """``base_model.model.model.layers`` (a PEFT-wrapped model) as the base model names it."""
    return name.removeprefix("base_model.model.")


def block_projections(model: Any) -> BlockLayout:
    """What the blocks of ``model`` offer (``block_walk.BlockLayout``): every block walked, routers
    and gates left out."""
    blocks_path, blocks = find_blocks(model)
    return walk_blocks(blocks_path, blocks, expert_count(getattr(model, "config", None)))


def _targets(model: Any, layout: BlockLayout, chosen: list[str], parameters: list[str], **extra: Any) -> Targets:
    """``Targets`` of the ``chosen`` projection paths and expert ``parameters`` of ``layout``: each
    one's block count, the groups of a model with experts, and the projections PEFT's v5 conversion
    would move onto the experts (``block_walk.peft_rewritten_names``) adapted through their weight."""
    held = {p: len(i) for p, _, _, i in layout.projections} | {p: len(i) for p, i in layout.parameters}
    kinds = {p: k for p, k, _, _ in layout.projections}
    rewritten = peft_rewritten_names(model)
    groups = layout.group_layers(set(chosen) | set(parameters)) if layout.parameters else {}
    words = [f"{group} in {n} layer{'s' if n > 1 else ''}" for group, n in list(groups.items())[:1]]
    words += [f"{group} in {n}" for group, n in list(groups.items())[1:]]
    return Targets(
        layout.blocks,
        layout.layers,
        tuple(chosen),
        tuple(kinds[p] for p in chosen),
        tuple(parameters),
        spread=tuple(held[p] for p in (*chosen, *parameters)),
        groups=tuple(words),
        via_parameters=tuple(p for p in chosen if p.rpartition(".")[2] in rewritten),
        **extra,
    )


def resolve_targets(
    model: Any, target_modules: list[str], attention: bool = True, mlp: bool = True, language: bool = True
) -> Targets:
    """The projections of ``model`` that get adapters for a request's ``target_modules`` and its
    ``finetune_attention_modules`` / ``finetune_mlp_modules`` / ``finetune_language_layers``
    switches (a text-only model is all language layers: that switch off selects nothing).

    ``["all-linear"]``: every block projection of the chosen kinds (experts' 3-D parameters among
    the MLP ones). A list of names: each must be a projection of the blocks, matched as PEFT does
    (the name, or the end of the path after a dot); names that match nothing are refused naming
    what the model has, as is a list that takes part of a fused layer's family (none of the names
    may be left unmatched). Raises TargetError (a ValueError) naming ``target_modules``."""
    layout = block_projections(model)
    projections = [(path, kind) for path, kind, _, _ in layout.projections]
    parameters = [path for path, _ in layout.parameters]
    kinds = {"attention": attention, "mlp": mlp}
    if target_modules == [ALL_LINEAR] and not language:
        raise TargetError(
            "finetune_language_layers: it is off, and this model's blocks are all language layers, so nothing "
            "would be trained; turn it on"
        )
    if target_modules == [ALL_LINEAR]:
        chosen = [(path, kind) for path, kind in projections if kinds[kind]]
        chosen_parameters = parameters if mlp else []
        if not chosen and not chosen_parameters:
            raise TargetError(
                "finetune_attention_modules / finetune_mlp_modules: both are off, so nothing would be trained; "
                "turn one on"
            )
        return _targets(model, layout, [p for p, _ in chosen], chosen_parameters)
    outside = _linear_paths(model, layout.blocks)
    available = [path for path, _ in projections] + parameters
    unmatched = [n for n in target_modules if not any(_matches(p, n) for p in available + outside)]
    if unmatched:
        raise TargetError(
            f"target_modules: {', '.join(unmatched)} matched nothing in this model; "
            f'its block projections are {", ".join(available)}; list those, or use ["all-linear"]'
        )
    chosen = [(path, kind) for path, kind in projections if any(_matches(path, n) for n in target_modules)]
    chosen_parameters = [p for p in parameters if any(_matches(p, n) for n in target_modules)]
    return _targets(
        model,
        layout,
        [p for p, _ in chosen],
        chosen_parameters,
        explicit=tuple(n for n in target_modules if not any(_matches(p, n) for p in parameters)),
        outside=tuple(p for p in outside if any(_matches(p, n) for n in target_modules)),
    )


def _linear_paths(model: Any, blocks: str) -> list[str]:
    """Linear layers outside the blocks (``lm_head``; a list may name them on purpose)."""
    return [
        strip_peft_prefix(path)
        for path, module in model.named_modules()
        if linear(module) and not strip_peft_prefix(path).startswith(blocks + ".")
    ]


def _matches(path: str, name: str) -> bool:
    return path == name or path.endswith("." + name)


def adapted(model: Any) -> dict[str, Any]:
    """What a PEFT-wrapped ``model`` really adapts, for ``run.json`` and the run's summary:
    ``{"modules": [paths inside a block], "outside": [paths outside the blocks], "parameters":
    [expert parameter paths inside a block], "count": LoRA layers in all}``; empty lists and 0 for
    a model without LoRA layers (full fine-tuning)."""
    from peft.tuners.lora import LoraLayer

    blocks, _ = find_blocks(model)
    inside: dict[str, None] = {}
    outside: dict[str, None] = {}
    parameters: dict[str, None] = {}
    count = 0
    for path, module in model.named_modules():
        name = getattr(module, "parameter_name", None)  # a lora.ParamWrapper; several on one module nest
        if not isinstance(module, LoraLayer) or (".base_layer" in path and not name):
            continue
        count += 1
        path = strip_peft_prefix(path).replace(".base_layer", "")
        match = re.match(rf"^{re.escape(blocks)}\.\d+\.(.+)$", path)
        if name and name != "weight":  # a lora.ParamWrapper: the module that holds the expert parameter
            parameters[f"{match.group(1) if match else path}.{name}"] = None
        elif match:
            inside[match.group(1)] = None
        else:
            outside[path] = None
    return {"modules": list(inside), "outside": list(outside), "parameters": list(parameters), "count": count}
