"""Parameter counts of a decoder-only causal LM from its config alone (no weights, no model built).

The LLaMA-family layout that ``transformers`` uses for llama, mistral, qwen2/3, gemma, smollm and
their kin: an embedding (vocab x d), per layer ``q_proj`` d->H*hd, ``k_proj`` / ``v_proj``
d->KV*hd, ``o_proj`` H*hd->d, ``gate_proj`` / ``up_proj`` d->I, ``down_proj`` I->d and two
RMSNorm weights (d), a final norm (d), and an ``lm_head`` (d x vocab) unless tied to the embedding
(``tie_word_embeddings``). Biases: ``attention_bias`` (q, k, v, o; Qwen2 always on q, k, v) and
``mlp_bias``; Qwen3 adds per-head q/k norms (hd each). Mixture-of-experts configs are refused.
LoRA targets are matched as PEFT does (``peft.tuners.tuners_utils.check_target_module_exists``: a
module's name equals a target or ends with ``.target``; ``"all-linear"``: every linear layer but
the output layer). A test checks both counts against the real SmolLM2 model and PEFT.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

PROJECTIONS = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")


class UnsupportedModelError(ValueError):
    """The config's architecture is not one the estimate can count (the message names the field)."""


@dataclass(frozen=True)
class Shapes:
    """Widths of one decoder layer: ``hidden`` d, ``q`` = heads x head_dim, ``kv`` = kv heads x
    head_dim, ``intermediate`` I, ``heads``; ``layers`` L and ``vocab`` V."""

    hidden: int
    q: int
    kv: int
    intermediate: int
    heads: int
    layers: int
    vocab: int

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
    layers' linear projections (what bitsandbytes quantizes for QLoRA; biases excluded);
    ``lora``: LoRA A + B parameters for the request's targets and rank (0 without LoRA);
    ``lora_modules``: adapted projections per layer, by name."""

    total: int
    block_linear: int
    lora: int
    lora_modules: tuple[str, ...]


def shapes(config: Any) -> Shapes:
    """The layer widths of ``config`` (a ``transformers.PretrainedConfig``). Raises
    UnsupportedModelError for mixture-of-experts or non-decoder configs."""
    text = getattr(config, "text_config", None) or config  # multimodal wrappers keep the LM in text_config
    if any(getattr(text, key, None) for key in ("num_experts", "num_local_experts", "n_routed_experts")):
        raise UnsupportedModelError(f"{text.model_type}: mixture-of-experts models are not estimated")
    needed = ("hidden_size", "num_hidden_layers", "num_attention_heads", "intermediate_size", "vocab_size")
    missing = [key for key in needed if getattr(text, key, None) is None]
    if missing:
        raise UnsupportedModelError(
            f"{getattr(text, 'model_type', 'the model')}: its config has no {', '.join(missing)}"
        )
    heads = text.num_attention_heads
    head_dim = getattr(text, "head_dim", None) or text.hidden_size // heads
    kv_heads = getattr(text, "num_key_value_heads", None) or heads
    return Shapes(
        hidden=text.hidden_size,
        q=heads * head_dim,
        kv=kv_heads * head_dim,
        intermediate=text.intermediate_size,
        heads=heads,
        layers=text.num_hidden_layers,
        vocab=text.vocab_size,
    )


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
    ``target_modules``, when ``lora``): per adapted projection r x (in + out)."""
    s = shapes(config)
    text = getattr(config, "text_config", None) or config
    linear = s.linear()
    block_linear = s.layers * sum(n_in * n_out for n_in, n_out in linear.values())
    qkv_bias = bool(getattr(text, "attention_bias", False)) or text.model_type == "qwen2"
    bias = (s.q + 2 * s.kv) * qkv_bias + s.hidden * bool(getattr(text, "attention_bias", False))
    bias += (2 * s.intermediate + s.hidden) * bool(getattr(text, "mlp_bias", False))
    norms = 2 * s.hidden + (2 * s.q // s.heads if text.model_type == "qwen3" else 0)
    tied = getattr(config, "tie_word_embeddings", getattr(text, "tie_word_embeddings", True))
    embeddings = s.vocab * s.hidden * (1 if tied else 2)
    total = block_linear + s.layers * (bias + norms) + s.hidden + embeddings
    modules = lora_targets(target_modules) if lora else ()
    adapters = s.layers * sum(lora_r * sum(linear[name]) for name in modules)
    return ParameterCounts(total=total, block_linear=block_linear, lora=adapters, lora_modules=modules)
