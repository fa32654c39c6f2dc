"""Parameter counts of a decoder-only causal LM from its config alone (no weights, no model built).

The LLaMA-family layout that ``transformers`` uses for llama, mistral, qwen2/3, gemma, smollm and
their kin: an embedding (vocab x d), per layer ``q_proj`` d->H*hd, ``k_proj`` / ``v_proj``
d->KV*hd, ``o_proj`` H*hd->d, ``gate_proj`` / ``up_proj`` d->I, ``down_proj`` I->d and two
RMSNorm weights (d), a final norm (d), and an ``lm_head`` (d x vocab) unless tied to the embedding
(``tie_word_embeddings``). Biases: ``attention_bias`` (q, k, v, o; Qwen2 always on q, k, v) and
``mlp_bias``; Qwen3 adds per-head q/k norms (hd each).

Mixture-of-experts configs (Qwen2/3-MoE ``num_experts`` x ``moe_intermediate_size``, Mixtral and
gpt-oss ``num_local_experts`` x ``intermediate_size``, DeepSeek ``n_routed_experts``) count **every
expert** in the weights and ``num_experts_per_tok`` of them in the work per token: per MoE layer a
router (d x E, gpt-oss with a bias), the experts as transformers 5 keeps them, fused 3-D
parameters ``gate_up_proj`` (E x d x 2I) and ``down_proj`` (E x I x d) (gpt-oss: with biases),
and a shared expert where the config has one (``shared_expert_intermediate_size``,
``n_shared_experts``); dense layers (``mlp_only_layers``, ``decoder_sparse_step``,
``first_k_dense_replace``) keep a dense MLP of ``intermediate_size``. The fused experts and the
routers (transformers 5's ``...TopKRouter``) are parameters, not ``nn.Linear`` modules, so QLoRA
(bitsandbytes replaces ``nn.Linear`` / ``Conv1D``) leaves them in the compute dtype:
``block_linear`` leaves them out. Their LoRA adapters are PEFT's
``lora.ParamWrapper``: r x E x (in + out) per parameter (``peft/tuners/lora/layer.py``).
LoRA targets are matched as PEFT does (``peft.tuners.tuners_utils.check_target_module_exists``: a
module's name equals a target or ends with ``.target``; ``"all-linear"``: every linear layer but
the output layer). A test checks both counts against the real SmolLM2 model and PEFT.

A vision-language config adds its vision tower and projector (the model kind's
``extra_parameters``, counted on the model built on the ``meta`` device, no memory) to ``total``
(weights held in memory); they are frozen unless ``finetune_vision_layers`` adapts them.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from trainer_core.model_kind import kind_of

PROJECTIONS = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")
EXPERT_KEYS = ("num_experts", "num_local_experts", "n_routed_experts")
ATTENTION = PROJECTIONS[:4]


class UnsupportedModelError(ValueError):
    """The config's architecture is not one the estimate can count (the message names the field)."""


@dataclass(frozen=True)
class Shapes:
    """Widths of one decoder layer: ``hidden`` d, ``q`` = heads x head_dim, ``kv`` = kv heads x
    head_dim, ``intermediate`` I, ``heads``; ``layers`` L and ``vocab`` V. A mixture of experts
    (``experts`` E > 0) has ``moe_layers`` of its L layers with E experts of width
    ``intermediate``, ``active_experts`` k of them per token, a shared expert of width ``shared``
    (0: none); its other layers a dense MLP of width ``dense``."""

    hidden: int
    q: int
    kv: int
    intermediate: int
    heads: int
    layers: int
    vocab: int
    experts: int = 0
    active_experts: int = 0
    moe_layers: int = 0
    shared: int = 0
    dense: int = 0

    def active_intermediate(self) -> int:
        """The MLP width one token passes through in a layer: k x I + the shared expert's for a MoE
        layer (what its activations and FLOPs scale with), I for a dense model."""
        return self.active_experts * self.intermediate + self.shared if self.experts else self.intermediate

    def linear(self) -> dict[str, tuple[int, int]]:
        """(in_features, out_features) of each projection of one layer."""
        d, q, kv, i = self.hidden, self.q, self.kv, self.intermediate
        return {
            "q_proj": (d, q),
            "k_proj": (d, kv),
            "v_proj": (d, kv),
            "o_proj": (q, d),
            "gate_proj": (d, i),
            "up_proj": (d, i),
            "down_proj": (i, d),
        }


@dataclass(frozen=True)
class ParameterCounts:
    """``total``: unique parameters (a tied head once); ``block_linear``: weights of the decoder
    layers' ``nn.Linear`` projections (what bitsandbytes quantizes for QLoRA; biases excluded);
    ``lora``: LoRA A + B parameters for the request's targets and rank (0 without LoRA);
    ``lora_modules``: adapted projections per layer, by name; ``active_linear``: the block
    weights one token multiplies with (a MoE model's routed experts counted k of E times; equal to
    ``block_linear`` for a dense model)."""

    total: int
    block_linear: int
    lora: int
    lora_modules: tuple[str, ...]
    active_linear: int = 0
    vision: int = 0  # a vision-language model's tower and projector (in ``total``)


def shapes(config: Any) -> Shapes:
    """The layer widths of ``config`` (a ``transformers.PretrainedConfig``). Raises
    UnsupportedModelError for configs without the LLaMA-layout widths (GPT-2's ``n_embd``, ...)."""
    text = getattr(config, "text_config", None) or config  # multimodal wrappers keep the LM in text_config
    needed = ("hidden_size", "num_hidden_layers", "num_attention_heads", "intermediate_size", "vocab_size")
    missing = [key for key in needed if getattr(text, key, None) is None]
    if missing:
        raise UnsupportedModelError(
            f"{getattr(text, 'model_type', 'the model')}: its config has no {', '.join(missing)}"
        )
    heads = text.num_attention_heads
    head_dim = getattr(text, "head_dim", None) or text.hidden_size // heads
    kv_heads = getattr(text, "num_key_value_heads", None) or heads
    dense = Shapes(
        hidden=text.hidden_size,
        q=heads * head_dim,
        kv=kv_heads * head_dim,
        intermediate=text.intermediate_size,
        heads=heads,
        layers=text.num_hidden_layers,
        vocab=text.vocab_size,
    )
    experts = next((getattr(text, key) for key in EXPERT_KEYS if getattr(text, key, None)), 0)
    if not experts:
        return dense
    width = getattr(text, "moe_intermediate_size", None) or text.intermediate_size
    shared = getattr(text, "shared_expert_intermediate_size", None) or 0
    shared = shared or (getattr(text, "n_shared_experts", None) or 0) * width
    return replace(
        dense,
        intermediate=width,
        experts=experts,
        active_experts=getattr(text, "num_experts_per_tok", None) or getattr(text, "experts_per_token", None) or 2,
        moe_layers=len(moe_layers(text)),
        shared=shared,
        dense=text.intermediate_size,
    )


def moe_layers(text: Any) -> list[int]:
    """The layer indices of a MoE config that route to experts: all but ``mlp_only_layers``, every
    ``decoder_sparse_step``-th (Qwen2/3-MoE), from ``first_k_dense_replace`` on (DeepSeek)."""
    layers = range(text.num_hidden_layers)
    dense = set(getattr(text, "mlp_only_layers", None) or [])
    step = getattr(text, "decoder_sparse_step", None) or 1
    first = getattr(text, "first_k_dense_replace", None) or 0
    return [i for i in layers if i not in dense and (i + 1) % step == 0 and i >= first]


def lora_targets(target_modules: list[str]) -> tuple[str, ...]:
    """The projections of a layer that PEFT adapts for ``target_modules`` (names or "all-linear")."""
    if target_modules == ["all-linear"]:
        return PROJECTIONS
    return tuple(
        name
        for name in PROJECTIONS
        if any(name == key or name.endswith("." + key) or key.endswith("." + name) for key in target_modules)
    )


def count_parameters(config: Any, target_modules: list[str], lora_r: int, lora: bool) -> ParameterCounts:
    """Parameter counts of ``config``'s model and of its LoRA adapters (rank ``lora_r`` on
    ``target_modules``, when ``lora``): per adapted projection r x (in + out); per adapted fused
    expert parameter r x E x (in + out) (gate and up share one)."""
    s = shapes(config)
    text = getattr(config, "text_config", None) or config
    linear = s.linear()
    attention = sum(n_in * n_out for name, (n_in, n_out) in linear.items() if name in ATTENTION)
    mlp = sum(n_in * n_out for name, (n_in, n_out) in linear.items() if name not in ATTENTION)
    modules = lora_targets(target_modules) if lora else ()
    per_layer_lora = sum(lora_r * sum(linear[name]) for name in modules)
    qkv_bias = bool(getattr(text, "attention_bias", False)) or text.model_type in (
        "qwen2",
        "qwen2_vl_text",
        "qwen2_5_vl_text",
    )
    bias = (s.q + 2 * s.kv) * qkv_bias + s.hidden * bool(getattr(text, "attention_bias", False))
    norms = 2 * s.hidden + (2 * s.q // s.heads if text.model_type in ("qwen3", "qwen3_moe") else 0)
    if s.experts:
        block_linear, extra, active, adapters = _moe_counts(s, text, attention, modules, lora_r)
        bias += s.heads * (text.model_type == "gpt_oss")  # attention sinks
    else:
        block_linear = s.layers * (attention + mlp)
        active, extra = block_linear, 0
        adapters = s.layers * per_layer_lora
        bias += (2 * s.intermediate + s.hidden) * bool(getattr(text, "mlp_bias", False))
    tied = getattr(config, "tie_word_embeddings", getattr(text, "tie_word_embeddings", True))
    embeddings = s.vocab * s.hidden * (1 if tied else 2)
    vision = kind_of(config).extra_parameters(config)  # a vision tower and projector
    total = block_linear + extra + s.layers * (bias + norms) + s.hidden + embeddings + vision
    return ParameterCounts(
        total=total, block_linear=block_linear, lora=adapters, lora_modules=modules, active_linear=active, vision=vision
    )


def _moe_counts(s: Shapes, text: Any, attention: int, modules: tuple[str, ...], r: int) -> tuple[int, int, int, int]:
    """(nn.Linear block weights, fused expert parameters and their biases, weights per token,
    LoRA parameters) of a mixture-of-experts config (see the module docstring)."""
    d, width, e = s.hidden, s.intermediate, s.experts
    router = d * e
    shared = 3 * d * s.shared
    dense_layers = s.layers - s.moe_layers
    block_linear = s.layers * attention + s.moe_layers * shared + dense_layers * 3 * d * s.dense
    experts = s.moe_layers * (e * 3 * d * width + router)
    biased = text.model_type == "gpt_oss"
    extra = experts + s.moe_layers * (e * (2 * width + d) + e) * biased  # expert and router biases
    active = block_linear + s.moe_layers * (s.active_experts * 3 * d * width + router)
    linear = s.linear()
    adapters = s.layers * sum(r * sum(linear[name]) for name in modules if name in ATTENTION)
    if {"gate_proj", "up_proj"} & set(modules):
        adapters += s.moe_layers * r * e * (d + 2 * width) + dense_layers * r * 2 * (d + s.dense)
    if "down_proj" in modules:
        adapters += s.moe_layers * r * e * (width + d) + dense_layers * r * (s.dense + d)
    return block_linear, extra, active, adapters
