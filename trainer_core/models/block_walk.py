"""What the transformer blocks of a loaded model hold, found by walking every block's modules: the
linear projections (``nn.Linear`` and GPT-2's ``Conv1D``) and the routed experts' 3-D parameters,
with the group each belongs to and how many blocks hold it.

Blocks differ in mixed dense + MoE models (DeepSeek-V3, Kimi K2, GLM-4.5: dense first layers, then
experts beside a shared expert), so no block stands for the others, and a name is no kind: a
``down_proj`` is an ``nn.Linear`` in a dense MLP or a shared expert and a 3-D parameter of the
routed experts in the next block. Routers and gates (the linear layer that scores the experts or
gates a shared expert) are never projections.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

ATTENTION_WORDS = ("attn", "attention")
# groups, in the order the check's target line lists them
GROUPS = ("attention", "dense MLP", "shared experts", "routed experts")


@dataclass(frozen=True)
class BlockLayout:
    """The blocks of one model: ``blocks`` (their path, ``model.layers``) and ``layers`` (count);
    ``projections``: (path inside a block, kind ``"attention"`` / ``"mlp"``, group, indexes of the
    blocks holding it) for each linear projection, attention first; ``parameters``: (path inside a
    block, indexes of the blocks holding it) for each 3-D expert parameter."""

    blocks: str
    layers: int
    projections: tuple[tuple[str, str, str, frozenset[int]], ...]
    parameters: tuple[tuple[str, frozenset[int]], ...]

    def group_layers(self, paths: set[str]) -> dict[str, int]:
        """How many blocks hold each group among ``paths`` (projection or parameter paths), in GROUPS order."""
        counts: dict[str, int] = {}
        for group in GROUPS:
            holding = [i for p, _, g, i in self.projections if g == group and p in paths]
            holding += [i for p, i in self.parameters if group == "routed experts" and p in paths]
            if holding:
                counts[group] = len(frozenset().union(*holding))
        return counts


def linear(module: Any) -> bool:
    """Whether ``module`` is a linear projection LoRA adapts as a module (``nn.Linear``, ``Conv1D``)."""
    import torch.nn as nn
    from transformers.pytorch_utils import Conv1D

    return isinstance(module, (nn.Linear, Conv1D))


def expert_count(config: Any) -> int:
    """The routed experts per MoE block in ``config`` (its text config's), 0 for a dense model."""
    config = getattr(config, "text_config", None) or config
    for name in ("num_experts", "num_local_experts", "n_routed_experts", "moe_num_experts"):
        value = getattr(config, name, None)
        if isinstance(value, int) and value > 1:
            return value
    return 0


def _kind(path: str) -> str:
    return "attention" if any(word in part for part in path.split(".")[:-1] for word in ATTENTION_WORDS) else "mlp"


def _router(moe_block: bool, path: str, module: Any, experts: int) -> bool:
    """A linear layer that routes rather than projects: outputs one score per expert, or one number
    (Qwen2-MoE's ``shared_expert_gate``), or is named ``router`` / ``gate`` in a block with experts."""
    leaf = path.rpartition(".")[2]
    out = getattr(module, "out_features", None) or getattr(module, "nf", None)
    return bool(experts and out == experts) or (moe_block and (out == 1 or leaf in ("router", "gate")))


def walk_blocks(blocks_path: str, blocks: Any, experts: int) -> BlockLayout:
    """The ``BlockLayout`` of ``blocks`` (the ``nn.ModuleList`` at ``blocks_path``), every block walked."""
    projections: dict[str, list[Any]] = {}
    parameters: dict[str, set[int]] = {}
    for index, block in enumerate(blocks):
        has_experts = False
        moe_block = any(name.rpartition(".")[2].endswith("experts") for name, _ in block.named_modules())
        found: list[tuple[str, str]] = []
        for path, module in block.named_modules():
            if not path:
                continue
            if path.rpartition(".")[2] == "experts":
                shaped = [n for n, p in module.named_parameters(recurse=False) if p.dim() == 3]
                for name in shaped:
                    parameters.setdefault(f"{path}.{name}", set()).add(index)
                has_experts = has_experts or bool(shaped)
            elif linear(module) and not _router(moe_block, path, module, experts):
                found.append((path, _kind(path)))
        for path, kind in found:
            group = "attention" if kind == "attention" else "dense MLP"
            if kind == "mlp" and ".experts." in f".{path}":  # experts kept as modules (remote code)
                group = "routed experts"
            elif kind == "mlp" and has_experts:
                group = "shared experts"
            projections.setdefault(path, [kind, group, set()])[2].add(index)
    order = {"attention": 0, "mlp": 1}
    ordered = sorted(projections.items(), key=lambda item: order[item[1][0]])
    return BlockLayout(
        blocks_path,
        len(blocks),
        tuple((path, kind, group, frozenset(i)) for path, (kind, group, i) in ordered),
        tuple((path, frozenset(i)) for path, i in parameters.items()),
    )


def peft_rewritten_names(model: Any) -> frozenset[str]:
    """Module names PEFT's transformers-v4-to-v5 conversion (``_convert_peft_config_moe``, run on
    every ``get_peft_model`` and ``PeftModel.from_pretrained`` of these model types) moves from
    ``target_modules`` onto the routed experts' parameters: ``gate_proj`` / ``up_proj`` /
    ``down_proj`` of DeepSeek-V3, GLM-4.5, Qwen3-MoE and the others PEFT maps as Qwen2-MoE
    (``w1`` / ``w2`` / ``w3`` for Mixtral's). A dense MLP or shared expert with such a name would
    lose its adapter (and PEFT warns about rank / alpha patterns for the fused pair), so those
    projections are adapted through ``target_parameters`` instead (their ``weight``). Empty for
    other models and PEFT versions without the conversion; a model without routed experts (every
    model type PEFT converts has them) is answered without importing PEFT (seconds: it imports
    bitsandbytes, which compiles its kernels with torch.compile)."""
    if not expert_count(getattr(model, "config", None)) and not any(
        "experts" in name.split(".") for name, _ in model.named_modules()
    ):
        return frozenset()
    try:
        from peft.utils import transformers_weight_conversion as conversion
    except ImportError:
        return frozenset()
    kinds = getattr(conversion, "_MODEL_TO_CONVERSION_PATTERN", {})
    mapping = getattr(conversion, "_MOE_TARGET_MODULE_MAPPING", {})
    model_type = getattr(getattr(model, "config", None), "model_type", None)
    return frozenset(mapping.get(kinds.get(model_type), {}))
