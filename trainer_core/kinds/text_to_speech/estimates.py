"""The memory and time estimates of a text-to-speech (CSM) run's check
(``TextToSpeechKind.estimates``): the stacks its training runs (``preflight.stacks``), from the
model's config and the rows as the check read them.

- the backbone, a LLaMA-layout decoder, over every position of a row: its text tokens, one position
  a codec frame (the frame's codebooks embedded and summed) and the audio's end; the longest batch
  is its longest row's positions ``batch_size`` times (the processor pads to the longest). Its LM
  head scores the first codebook at every position.
- the depth decoder, a LLaMA-layout decoder too, over each trained frame (the frames and the
  audio's end) as a sequence of ``num_codebooks`` positions (the backbone's hidden state projected,
  then the codebooks but the last); its heads score every codebook of it.
- the Mimi codec encoding the target clips inside ``forward``, frozen and without gradients:
  forward FLOPs only (its convolutions walked in order on the ``meta`` model at the rate each
  runs, its transformer's projections at its frame rate, the quantizer's distances to every code).

Values autograd saves per position per layer: ``memory.activation_elements`` (counted on SmolLM2,
the same layer).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

from trainer_core.kinds.text_to_speech.data import FRAMES_PER_SECOND
from trainer_core.kinds.text_to_speech.targets import CODEC, STACKS
from trainer_core.preflight.memory import activation_elements
from trainer_core.preflight.parameters import shapes
from trainer_core.preflight.stacks import Stack, layer_names

READ_SECONDS_PER_AUDIO_SECOND = 0.004  # decode + resample a clip to the codec's rate, every epoch (nothing kept)


@dataclass(frozen=True)
class Batch:
    """What a set of rows puts through the model: ``positions`` (the backbone's), ``frames`` (trained
    frames: the depth decoder's sequences), ``row_positions`` (one row's, what attention spans) and
    ``seconds`` of audio (the codec's input)."""

    positions: int
    frames: int
    row_positions: float
    seconds: float

    @classmethod
    def of(cls, split: Any) -> Batch:
        """All the rows of a split (its ``ClipSplitStats``): an epoch's positions, frames and audio."""
        return cls(split.total_tokens, split.trained_tokens, split.total_tokens / max(split.rows, 1), split.seconds)


def codec_flops_per_second(model: Any, config: Any) -> float:
    """Forward FLOPs of the codec (``CODEC`` in the ``meta`` ``model``) encoding one second of
    audio: each encoder convolution 2 x k x in x out / groups per output sample at the rate it runs
    (its input's rate / stride, in module order), its transformer's projections 2 FLOPs a weight per
    frame, and the quantizer's distances to every code of every codebook at the frame rate."""
    import torch

    codec = model.get_submodule(CODEC)
    rate, flops = float(config.codec_config.sampling_rate), 0.0
    for name, module in codec.named_modules():
        if not name.startswith("encoder."):
            continue
        if isinstance(module, torch.nn.Conv1d):
            rate /= module.stride[0]
            flops += 2.0 * module.kernel_size[0] * module.in_channels * module.out_channels / module.groups * rate
        elif isinstance(module, torch.nn.Linear):
            flops += 2.0 * module.in_features * module.out_features * rate
    codes = config.codec_config.num_quantizers * config.codec_config.codebook_size * config.codec_config.codebook_dim
    return flops + 2.0 * codes * FRAMES_PER_SECOND


def _saved(config: Any, request: Any, adapted: tuple[str, ...], path: str) -> int:
    """Values saved per position per layer of the LLaMA-layout stack at ``path`` (a full fine-tune
    adapts nothing and saves every input)."""
    names = {name.rsplit(".", 1)[-1] for name in layer_names(adapted, path)}
    return activation_elements(shapes(config), request, tuple(names))


def csm_stacks(config: Any, request: Any, adapted: tuple[str, ...], batch: Batch, codec_flops: float) -> list[Stack]:
    """The stacks of ``config``'s CSM over ``batch`` (see the module docstring)."""
    backbone, depth = shapes(config), shapes(config.depth_decoder_config)
    codebooks = config.num_codebooks
    linear = lambda s: s.layers * sum(n_in * n_out for n_in, n_out in s.linear().values())  # noqa: E731
    frames = round(batch.seconds * FRAMES_PER_SECOND)
    return [
        Stack(
            "backbone",
            backbone.layers,
            backbone.hidden,
            batch.positions,
            saved=_saved(config, request, adapted, f"{STACKS[0]}.layers"),
            matmul=linear(backbone) + backbone.vocab * backbone.hidden,
            attention=backbone.layers * backbone.q * round(batch.row_positions),
        ),
        Stack(
            "depth decoder",
            depth.layers,
            depth.hidden,
            batch.frames * codebooks,
            saved=_saved(config.depth_decoder_config, request, adapted, f"{STACKS[1]}.layers"),
            matmul=linear(depth) + backbone.hidden * depth.hidden + depth.vocab * depth.hidden,
            attention=depth.layers * depth.q * codebooks,
        ),
        Stack("codec", 1, 0, frames, matmul=round(codec_flops / FRAMES_PER_SECOND / 2), grad=False),
    ]


def estimates(request: Any, folder: Optional[Path], data: Any, plan: Any) -> dict[str, Any]:
    """The check report's estimate fields (``stack_costs.report_fields``) of a CSM run on ``data``
    (``ClipSplits``) with ``plan``; or ``no_estimates`` saying why not (``stacks.counted_model``)."""
    from trainer_core.preflight.costs import training_device
    from trainer_core.preflight.stack_costs import memory_estimate, report_fields, split_time
    from trainer_core.preflight.stacks import counted_model

    found = counted_model(folder, request, frozen=(CODEC,))
    if isinstance(found, str):
        return {"no_estimates": found}
    config, model, counts = found
    codec = codec_flops_per_second(model, config)
    stats, device = data.stats, training_device()
    rows = min(request.batch_size, stats.rows)
    longest = Batch(
        rows * stats.longest_tokens, rows * stats.longest_trained, stats.longest_tokens, rows * stats.longest_seconds
    )
    memory = memory_estimate(
        request,
        counts,
        csm_stacks(config, request, counts.adapted, longest, codec),
        (longest.positions + longest.frames * config.num_codebooks) * config.vocab_size,
        device,
        f"{rows} rows of {stats.longest_tokens} positions ({stats.longest_trained} trained frames each)",
    )
    passes = plan.total_steps / max(plan.steps_per_epoch, 1)
    time_ = split_time(
        request,
        counts,
        data,
        plan,
        lambda split: csm_stacks(config, request, counts.adapted, Batch.of(split), codec),
        stats.total_tokens,
        device,
        READ_SECONDS_PER_AUDIO_SECOND * stats.seconds * passes,
    )
    return report_fields(memory, time_)


__all__ = ["codec_flops_per_second", "csm_stacks", "estimates"]
