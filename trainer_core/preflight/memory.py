"""Peak memory of a training run, estimated from the model's config and the longest batch.

Parts (bytes, summed into GiB):

- ``runtime``: the worker's Python with torch, transformers, TRL, PEFT and datasets imported, and
  the process's other fixed costs (the tokenized data, the trainer); measured on this machine
  (``RUNTIME_GIB``). On CUDA: the CUDA context instead (not measured).
- ``weights``: every parameter in the compute dtype (``models.loading.compute_dtype``: fp32 on CPU,
  bf16 on CUDA); for QLoRA the decoder layers' projections in 4-bit NF4 (0.5 byte per weight plus
  the double-quantized block scales, ``NF4_BYTES_PER_PARAM``), the rest in the compute dtype.
- ``trainable_parameters``: the LoRA adapters, kept in fp32 by PEFT (full fine-tuning trains the
  weights themselves: nothing extra).
- ``gradients``: one per trainable parameter, in its dtype.
- ``optimizer_state``: AdamW keeps two moments per trainable parameter in its dtype (``adamw_*``);
  8-bit AdamW 2 bytes; SGD (momentum 0 in transformers) none; Adafactor the row and column
  second moments of each matrix.
- ``activations``: what autograd saves for the backward pass, per token per decoder layer, for the
  tokens of the longest padding-free batch (``activation_elements``; counted tensor by tensor on
  SmolLM2 with ``torch.autograd.graph.saved_tensors_hooks``, and tested against that count). With
  gradient checkpointing: each layer's input, plus one layer recomputed in full.
- ``logits``: our loss computes the LM head only at the K trained positions of the batch
  (``training.trainer.answer_loss``, ``logits_to_keep``); at the start of the backward pass the
  saved log-softmax, the loss gradient and the logits gradient are K x vocab fp32 each.
- ``working_buffers``: tensors alive only inside one layer's forward or backward (the attention
  and MLP intermediates autograd does not keep, the gradients flowing back) and the allocator's
  free-but-kept memory: ``WORKING_SHARE`` of the saved activations, fitted (with the 0.17 GiB of
  ``runtime`` beyond the imports) to the peak RSS of two measured CPU runs of 462 and 919 tokens
  per batch and checked on others (``bench/preflight.py``; docs/BENCHMARKS.md).
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any, Optional

from pydantic import BaseModel, Field

from trainer_core.preflight.parameters import ParameterCounts, Shapes, count_parameters, shapes
from trainer_core.schemas import TrainingStartRequest
from trainer_core.vocabulary import TrainingType

GIB = 2**30
# cpu: the worker's RSS besides weights and training tensors: 0.53 GiB after its imports (torch 2.13, this
# machine) + 0.17 GiB tokenizer, data and trainer (the intercept of the fit below); cuda: context, not measured
RUNTIME_GIB = {"cpu": 0.70, "cuda": 0.5}
NF4_BYTES_PER_PARAM = (
    0.5 + 1 / 64 + 4 / (64 * 256)
)  # 4 bits + an 8-bit scale per 64 weights + an fp32 scale per 256 scales
LOGIT_COPIES = 3  # saved log-softmax, loss gradient, logits gradient (fp32, K x vocab each)
WORKING_SHARE = 0.35  # working buffers = this x the saved activations (fitted on CPU runs, bench/preflight.py)


class MemoryEstimate(BaseModel):
    """Estimated peak memory of the training process and its parts, in GiB."""

    total_gib: float = Field(description="Estimated peak: the process RSS on CPU, the device memory on CUDA.")
    parts_gib: dict[str, float] = Field(
        description="runtime, weights, trainable_parameters, gradients, "
        "optimizer_state, activations, logits, working_buffers."
    )
    device: str = Field(description="cpu or cuda.")
    free_gib: Optional[float] = Field(None, description="Free memory of that device now (None when unknown).")
    basis: str = Field(description="What the estimate assumes, in one line.")


def dtype_bytes(device: str) -> int:
    """Bytes per value of the compute dtype the worker loads the model in (``compute_dtype``):
    4 (fp32) on CPU, 2 (bf16) on CUDA (a GPU without bf16 trains in fp32: 4)."""
    if device != "cuda":
        return 4
    import torch

    return 2 if torch.cuda.is_available() and torch.cuda.is_bf16_supported() else 4


def activation_elements(s: Shapes, request: TrainingStartRequest, adapted: tuple[str, ...]) -> int:
    """Values autograd saves per token in one decoder layer (LLaMA layout, SDPA attention).

    Always: two RMSNorms (input and 1/rms: 2 (d + 1)); attention q, k, v after RoPE and the output
    with its log-sum-exp (2 q + 2 kv + heads); SwiGLU gate, SiLU(gate), up (3 I). Then the inputs
    of the projections where a weight gradient needs them: full fine-tuning saves each distinct
    input once (d for q/k/v, q for o, d for gate/up, I for down) and the two normalized outputs
    (2 d); LoRA saves, per adapted projection of input width w, its dropout output and dropout
    mask (2 w) when ``lora_dropout`` > 0 or else the shared input once, plus r for the A output.
    Measured on SmolLM2 (d 576, I 1536): 17,403 per layer with LoRA r16 on all seven projections
    and dropout 0.05, 10,683 with dropout 0 — this formula gives both exactly. A mixture of experts
    counts the k experts a token passes (``Shapes.active_intermediate``), k copies of the experts'
    input and the router's E logits (not measured tensor by tensor)."""
    d, q, kv, inner = s.hidden, s.q, s.kv, s.active_intermediate()
    routed = s.active_experts if s.experts else 1  # a MoE token enters k experts: k copies of its input
    values = 2 * (d + 1) + 2 * q + 2 * kv + s.heads + 3 * inner + s.experts  # + the router's logits
    groups = {
        ("q_proj", "k_proj", "v_proj"): d,
        ("o_proj",): q,
        ("gate_proj", "up_proj"): d * routed,
        ("down_proj",): inner,
    }
    full = request.training_type == TrainingType.full
    return values + projection_inputs(groups, adapted, request) + 2 * d * full


def projection_inputs(groups: dict[tuple[str, ...], int], adapted: Collection[str], request: Any) -> int:
    """Values autograd saves per position for the inputs of a layer's projections, given as
    ``groups`` of projections that read one input of width w: full fine-tuning saves each group's
    input once; LoRA, per projection in ``adapted``, its dropout output and mask (2 w) when
    ``lora_dropout`` > 0 or else the group's input once, plus r for the A output."""
    if request.training_type == TrainingType.full:
        return sum(groups.values())
    values = 0
    for members, width in groups.items():
        mine = [name for name in members if name in adapted]
        if request.lora_dropout > 0:
            values += 2 * width * len(mine)
        elif mine:
            values += width
        values += request.lora_r * len(mine)
    return values


def _optimizer_bytes(request: TrainingStartRequest, counts: ParameterCounts, s: Shapes, param_bytes: int) -> float:
    """Optimizer state for the trainable parameters (see the module docstring)."""
    trainable = counts.lora if request.training_type != TrainingType.full else counts.total
    if request.optim == "sgd":
        return 0.0
    if request.optim in ("paged_adamw_8bit", "adamw_bnb_8bit"):
        return 2.0 * trainable
    if request.optim == "adafactor":  # factored second moments: rows + columns of each matrix
        if request.training_type == TrainingType.full:
            per_layer = sum(n_in + n_out for n_in, n_out in s.linear().values())
            return 4.0 * (s.layers * per_layer + s.vocab + s.hidden)
        return (
            4.0
            * s.layers
            * sum(
                request.lora_r * 2 + n_in + n_out
                for name, (n_in, n_out) in s.linear().items()
                if name in counts.lora_modules
            )
        )
    return 2.0 * param_bytes * trainable


def memory_parts(
    request: TrainingStartRequest, model_config: Any, longest_batch_tokens: int, device: str, trained_tokens: int
) -> dict[str, float]:
    """The parts of the estimate in bytes (keys as in ``MemoryEstimate.parts_gib``)."""
    s = shapes(model_config)
    lora = request.training_type != TrainingType.full
    counts = count_parameters(model_config, list(request.target_modules), request.lora_r, lora)
    value = dtype_bytes(device)
    if request.training_type == TrainingType.qlora:
        weights = counts.block_linear * NF4_BYTES_PER_PARAM + (counts.total - counts.block_linear) * value
    else:
        weights = counts.total * value
    param_bytes = 4 if lora else value  # PEFT keeps adapters in fp32
    trainable = counts.lora if lora else counts.total
    per_layer = activation_elements(s, request, counts.lora_modules) * value * longest_batch_tokens
    if request.gradient_checkpointing:
        activations = s.layers * s.hidden * value * longest_batch_tokens + per_layer
    else:
        activations = s.layers * per_layer
    return {
        "runtime": RUNTIME_GIB["cuda" if device == "cuda" else "cpu"] * GIB,
        "weights": weights,
        "trainable_parameters": counts.lora * 4.0,
        "gradients": trainable * float(param_bytes),
        "optimizer_state": _optimizer_bytes(request, counts, s, param_bytes),
        "activations": float(activations),
        "logits": LOGIT_COPIES * 4.0 * trained_tokens * s.vocab,
        "working_buffers": WORKING_SHARE * activations,
    }


def free_memory_gib(device: str) -> Optional[float]:
    """Free memory now: ``psutil.virtual_memory().available`` on CPU, ``torch.cuda.mem_get_info``
    on CUDA (None when no GPU answers)."""
    if device == "cuda":
        import torch

        if not torch.cuda.is_available():
            return None
        return torch.cuda.mem_get_info()[0] / GIB
    import psutil

    return psutil.virtual_memory().available / GIB


def estimate_memory(
    request: TrainingStartRequest,
    model_config: Any,
    longest_batch_tokens: int,
    device: str,
    longest_batch_trained_tokens: Optional[int] = None,
    lm_head: bool = True,
) -> MemoryEstimate:
    """Estimated peak memory of training ``request`` on ``device`` ("cpu" or "cuda").

    ``model_config``: the model's ``transformers.PretrainedConfig`` (no weights are read).
    ``longest_batch_tokens``: tokens of the largest padding-free batch (the ``batch_size`` longest
    rows after truncation, or max_seq_length x batch_size with packing).
    ``longest_batch_trained_tokens``: the labelled tokens of that batch (where the LM head runs);
    None counts every token (an upper bound). ``lm_head`` False: no LM head runs (an embedder pools
    its hidden states), so no logits are held. With ``num_processes`` > 1 (DDP) on the CPU the
    processes share the machine's memory: every part is counted once per process; on GPUs the
    estimate is per GPU. Raises ``parameters.UnsupportedModelError`` for architectures it cannot
    count (configs without the LLaMA-layout widths, e.g. GPT-2's). A mixture of experts holds every
    expert in ``weights`` and its k active experts in ``activations``."""
    trained = longest_batch_tokens if longest_batch_trained_tokens is None else longest_batch_trained_tokens
    trained = trained if lm_head else 0
    parts = memory_parts(request, model_config, longest_batch_tokens, device, trained)
    precision = (
        "NF4 4-bit projections"
        if request.training_type == TrainingType.qlora
        else ("fp32" if dtype_bytes(device) == 4 else "bf16")
    )
    runtime = "CPU runtime measured on this machine" if device != "cuda" else "CUDA context assumed (not measured)"
    basis = (
        f"{precision} weights on {device}, {request.training_type.value}, optimizer {request.optim}, longest batch "
        f"{longest_batch_tokens} tokens ({f'{trained} trained' if lm_head else 'all embedded, no LM head'}), "
        "gradient checkpointing "
        f"{'on' if request.gradient_checkpointing else 'off'}; {runtime} ({parts['runtime'] / GIB:.2f} GiB)"
    )
    copies = request.num_processes if device != "cuda" else 1  # CPU processes share the machine's memory
    if request.num_processes > 1:
        basis += (
            f"; x {copies} processes, each with a whole copy of the model (DDP)"
            if copies > 1
            else f"; per GPU, each of the {request.num_processes} processes with a whole copy of the model (DDP)"
        )
    return MemoryEstimate(
        total_gib=round(copies * sum(parts.values()) / GIB, 3),
        parts_gib={name: round(copies * size / GIB, 3) for name, size in parts.items()},
        device=device,
        free_gib=_rounded(free_memory_gib(device)),
        basis=basis,
    )


def _rounded(value: Optional[float]) -> Optional[float]:
    return None if value is None else round(value, 2)
