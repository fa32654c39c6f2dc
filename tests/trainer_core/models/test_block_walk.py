"""The default LoRA targets of every MoE family transformers builds offline (tiny random
models, ``tests/support/families.py``) cover every linear projection in every block (dense MLPs,
shared experts, MLA and linear attention) and the routed experts, never a router or gate; the
coverage is asserted by walking the wrapped model after one backward, and again on the adapter as
saved and loaded back by plain PEFT."""

from __future__ import annotations

import warnings

import pytest
import torch

from tests.support.families import MOE_FAMILIES, family_model
from trainer_core.models.block_walk import peft_rewritten_names
from trainer_core.models.targets import adapted, find_blocks, resolve_targets
from trainer_core.schemas import TrainingStartRequest
from trainer_core.training.config import build_lora_config


def _expected(model) -> tuple[set[str], set[str]]:
    """(linear projections, 3-D expert parameters) inside the blocks, by full path: an independent
    walk; a router or gate is a linear layer named ``gate`` / ``router`` or with one output per
    expert, or a single output (a shared expert's gate)."""
    from transformers.pytorch_utils import Conv1D

    blocks, _ = find_blocks(model)
    config = getattr(model.config, "text_config", None) or model.config
    experts = {
        getattr(config, n, None) for n in ("num_experts", "num_local_experts", "n_routed_experts", "moe_num_experts")
    }
    linear, parameters = set(), set()
    for name, module in model.named_modules():
        if not name.startswith(blocks + "."):
            continue
        if isinstance(module, (torch.nn.Linear, Conv1D)):
            out = getattr(module, "out_features", None) or module.nf
            if name.rpartition(".")[2] not in ("gate", "router") and out != 1 and out not in experts:
                linear.add(name)
        if name.endswith("experts"):  # a convolution's 3-D weight (Qwen3-Next's linear attention) is no expert
            parameters |= {f"{name}.{p}" for p, w in module.named_parameters(recurse=False) if w.dim() == 3}
    return linear, parameters


def _lora(peft_model) -> dict[str, torch.nn.Module]:
    """Each LoRA layer of ``peft_model`` by what it adapts: a module's path, or ``path.parameter``
    for an expert parameter (a ``lora.ParamWrapper`` on a linear layer's ``weight`` counts as the module)."""
    from peft.tuners.lora import LoraLayer

    found = {}
    for name, module in peft_model.named_modules():
        if isinstance(module, LoraLayer):
            path = name.removeprefix("base_model.model.").replace(".base_layer", "")
            parameter = getattr(module, "parameter_name", None)
            found[path if parameter in (None, "weight") else f"{path}.{parameter}"] = module
    return found


@pytest.mark.parametrize("family", MOE_FAMILIES)
def test_every_block_projection_and_expert_of_each_moe_family_gets_lora_weights(family, tmp_path):
    from peft import PeftModel, get_peft_model

    model = family_model(family)
    linear, parameters = _expected(model)
    config = build_lora_config(TrainingStartRequest(model_name="m", local_datasets=["d.json"]), model)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        peft_model = get_peft_model(model, config)
    assert not [str(w.message) for w in caught if "pattern" in str(w.message) or "matched" in str(w.message)]
    ids = torch.randint(0, 1000, (1, 8))
    peft_model(input_ids=ids, labels=ids, use_cache=False).loss.backward()
    lora = _lora(peft_model)
    assert set(lora) == linear | parameters and parameters  # every projection and expert weight, no router
    for path, module in lora.items():
        grad = module.lora_B["default"].weight.grad
        assert grad is not None and grad.abs().sum() > 0, path  # in the forward, and trained
    peft_model.save_pretrained(tmp_path)
    reloaded = PeftModel.from_pretrained(family_model(family), tmp_path)  # plain PEFT, as the model card says
    assert set(_lora(reloaded)) == set(lora)
    for path, module in _lora(reloaded).items():
        assert torch.equal(module.lora_A["default"].weight, lora[path].lora_A["default"].weight), path


def test_the_check_line_lists_each_group_with_its_blocks_and_run_json_names_the_dense_mlp():
    from peft import get_peft_model

    model = family_model("deepseek_v3")  # layer 0 dense, layer 1 routed + one shared expert; MLA
    assert {"gate_proj", "up_proj", "down_proj"} <= peft_rewritten_names(model)  # PEFT would move them onto the experts
    assert not peft_rewritten_names(family_model("llama"))
    targets = resolve_targets(model, ["all-linear"])
    line = targets.summary()
    assert "attention in 2 layers, dense MLP in 1, shared experts in 1, routed experts in 1" in line
    assert targets.count == 5 * 2 + 3 + 3 + 2  # MLA's five in each block, dense MLP, shared expert, experts' two
    assert set(targets.via_parameters) == {"mlp.gate_proj", "mlp.up_proj", "mlp.down_proj"} | {
        f"mlp.shared_experts.{p}" for p in ("gate_proj", "up_proj", "down_proj")
    }
    found = adapted(
        get_peft_model(model, build_lora_config(TrainingStartRequest(model_name="m", local_datasets=["d.json"]), model))
    )
    assert {"mlp.gate_proj", "mlp.shared_experts.down_proj", "self_attn.kv_b_proj"} <= set(found["modules"])
    assert set(found["parameters"]) == {"mlp.experts.gate_up_proj", "mlp.experts.down_proj"}
    assert found["count"] == targets.count


@pytest.mark.parametrize("family", MOE_FAMILIES)
def test_the_experts_guard_never_hides_a_conversion(family):
    """``peft_rewritten_names`` answers a model without routed experts without importing PEFT: every
    model with experts still gets PEFT's own answer."""
    from peft.utils import transformers_weight_conversion as conversion

    model = family_model(family)
    kinds, mapping = conversion._MODEL_TO_CONVERSION_PATTERN, conversion._MOE_TARGET_MODULE_MAPPING
    assert peft_rewritten_names(model) == frozenset(mapping.get(kinds.get(model.config.model_type), {}))
