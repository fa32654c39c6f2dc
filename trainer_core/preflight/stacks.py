"""The model of the estimates for a model made of several stacks of layers (an audio encoder and
a text decoder, a backbone and a depth decoder, a frozen codec), for the kinds whose model is not
one decoder-only LM (``ModelKind.estimates``).

The kind describes each stack it runs (``Stack``: its layers, the values autograd saves per
position, the weights and attention a position passes) for the longest batch (memory) and for an
epoch (time), and its model's parameters are counted on the model built on the ``meta`` device
(``count_model``: no weights read; LoRA adapters matched as PEFT matches the run's own
``build_lora_config``). ``preflight.stack_costs`` adds them up as the text LM's estimates do.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional, Union

from trainer_core.vocabulary import TrainingType

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Stack:
    """One stack of layers as the estimates see it, over ``positions`` (the longest batch's for
    memory, an epoch's for time). ``saved``: values autograd keeps per position per layer while it
    trains; ``once``: values kept per position outside its layers (a final norm, an input every
    layer reads); ``matmul``: weights one position multiplies, all layers together (2 FLOPs each
    forward); ``attention``: query-key products per position, summed over its layers' attention
    blocks (width x positions attended; 4 FLOPs each forward); ``grad``: autograd records it (False:
    a part no gradient reaches, e.g. a frozen codec or a frozen front end below every adapter:
    forward FLOPs only, nothing saved)."""

    name: str
    layers: int
    hidden: int
    positions: int
    saved: int = 0
    once: int = 0
    matmul: int = 0
    attention: int = 0
    grad: bool = True

    def saved_values(self, checkpointing: bool) -> int:
        """Values autograd keeps for the backward pass (each layer's input alone plus one layer's
        saved values with gradient checkpointing)."""
        if not self.grad:
            return 0
        per_position = self.hidden * self.layers + self.saved if checkpointing else self.saved * self.layers
        return self.positions * (per_position + self.once)

    def flops(self, full: bool, training: bool = True) -> float:
        """Model FLOPs of its positions: forward 2 per weight and 4 per query-key product; training
        (where ``grad``) 4 (frozen weights) or 6 (``full``) per weight and 12 per product (PaLM's
        count, as ``timing.flops_per_token``)."""
        if not (training and self.grad):
            return self.positions * (2.0 * self.matmul + 4.0 * self.attention)
        return self.positions * ((6.0 if full else 4.0) * self.matmul + 12.0 * self.attention)


@dataclass(frozen=True)
class ModelCounts:
    """Parameters of a model as the run trains it: ``total`` (every weight held), ``trainable``
    (the LoRA adapters and ``modules_to_save``, or the whole model but its ``frozen`` parts),
    ``adapters`` (LoRA A + B, kept in fp32 by PEFT), ``factored`` (Adafactor's state values for the
    trainable ones: rows + columns of a matrix), ``quantized`` (the ``nn.Linear`` weights QLoRA
    holds in 4-bit) and ``adapted`` (module paths given adapters)."""

    total: int
    trainable: int
    adapters: int
    factored: int
    quantized: int
    adapted: tuple[str, ...] = ()


def _factored(shape: Sequence[int]) -> int:
    """Adafactor's state values for a parameter of ``shape``: rows + columns of a matrix, else all."""
    return shape[0] + shape[1] if len(shape) == 2 else math.prod(shape)


def count_model(model: Any, request: Any, frozen: tuple[str, ...] = ()) -> ModelCounts:
    """``ModelCounts`` of ``model`` (built on the ``meta`` device) trained as ``request``: LoRA
    adapters r x (in + out) on each ``nn.Linear`` the run's ``build_lora_config`` targets (PEFT's
    own matching), or a full fine-tune of every parameter outside the ``frozen`` module paths
    (e.g. a codec). Raises TargetError as the run would."""
    import torch
    from peft.tuners.tuners_utils import check_target_module_exists

    from trainer_core.training.config import build_lora_config

    params = dict(model.named_parameters())  # unique: a tied weight once
    total = sum(p.numel() for p in params.values())
    output = model.get_output_embeddings() if hasattr(model, "get_output_embeddings") else None
    skipped = {id(p) for p in output.parameters()} if output is not None else set()
    linear = [(name, m) for name, m in model.named_modules() if isinstance(m, torch.nn.Linear)]
    quantized = sum(
        m.weight.numel() for name, m in linear if not name.startswith(frozen) and id(m.weight) not in skipped
    )
    if request.training_type == TrainingType.full:
        shapes = [tuple(p.shape) for name, p in params.items() if not name.startswith(frozen)]
        trainable = sum(math.prod(s) for s in shapes)
        return ModelCounts(total, trainable, 0, sum(map(_factored, shapes)), quantized)
    config = build_lora_config(request, model)
    adapted = tuple(name for name, _ in linear if check_target_module_exists(config, name))
    sizes = {name: (m.in_features, m.out_features) for name, m in linear}
    r = request.lora_r
    adapters = sum(r * (sizes[n][0] + sizes[n][1]) for n in adapted)
    shapes = [s for n in adapted for s in ((r, sizes[n][0]), (sizes[n][1], r))]
    whole = tuple(config.modules_to_save or ())  # trained in full beside the adapters (matched as PEFT: by name's end)
    saved = [p for name, p in params.items() if any(f".{name}".rsplit(".", 1)[0].endswith(f".{m}") for m in whole)]
    factored = sum(map(_factored, shapes)) + sum(_factored(tuple(p.shape)) for p in saved)
    return ModelCounts(total, adapters + sum(p.numel() for p in saved), adapters, factored, quantized, adapted)


def pretrained_config(folder: Optional[Path]) -> Optional[Any]:
    """The ``PretrainedConfig`` saved in ``folder`` (its ``config.json``, read by ``AutoConfig``
    from local files), or None where there is none or it cannot be read (logged)."""
    if folder is None or not (Path(folder) / "config.json").is_file():
        return None
    from transformers import AutoConfig

    try:
        return AutoConfig.from_pretrained(str(folder), local_files_only=True)
    except (OSError, ValueError) as exc:
        log.info("no estimates for %s: %s", folder, exc)
        return None


def meta_model(config: Any, kind: Any) -> Any:
    """``kind``'s model (its ``model_class``) of ``config`` built on the ``meta`` device: every
    module and parameter shape, no memory taken, no weights read."""
    import torch

    with torch.device("meta"):
        return kind.model_class().from_config(config)


def layer_names(adapted: Sequence[str], layers: str) -> frozenset[str]:
    """The names inside one layer (e.g. ``self_attn.q_proj``) of the ``adapted`` module paths
    under the stack of layers at path ``layers`` (e.g. ``model.encoder.layers``)."""
    prefix = layers + "."
    return frozenset(path[len(prefix) :].split(".", 1)[1] for path in adapted if path.startswith(prefix))


def counted_model(
    folder: Optional[Path], request: Any, frozen: tuple[str, ...] = ()
) -> Union[tuple[Any, Any, ModelCounts], str]:
    """(config, ``meta`` model, ``ModelCounts``) of the model saved in ``folder`` (built by its
    kind's class) trained as ``request`` with ``frozen`` parts; or why not, in the report's words
    (its config is not here, or the model cannot be built or counted: logged)."""
    from trainer_core.model_kind import kind_for_folder
    from trainer_core.models.targets import TargetError

    config = pretrained_config(folder)
    if config is None:
        return "the model's config is not on this machine"
    try:
        model = meta_model(config, kind_for_folder(folder))
        return config, model, count_model(model, request, frozen)
    except (TargetError, ValueError, KeyError, TypeError, ImportError, AttributeError) as exc:
        log.info("no estimates for %s: %s", folder, exc)
        return f"the model could not be counted ({exc})"
