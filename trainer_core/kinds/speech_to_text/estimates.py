"""The memory and time estimates of a speech-to-text (Whisper) run's check
(``SpeechToTextKind.estimates``): the stacks its training runs (``preflight.stacks``), from the
model's config and the rows as the check read them.

Every clip is padded to the feature extractor's window, so the encoder runs ``max_source_positions``
frames a clip (1500 for 30 s: 3000 log-mel frames halved by its stride-2 convolution) whatever the
clip's length; the decoder runs each row's prompt and transcript tokens (the longest batch: its
longest row's, ``batch_size`` times), and every decoder layer's cross-attention projects every
frame to keys and values. The LM head scores every decoder position (fp32 logits over the
vocabulary). Values autograd saves per position per layer (d: width, I: the MLP's, h: heads),
counted tensor by tensor with ``saved_tensors_hooks`` on random Whispers and tested against that count:

- encoder layer: two LayerNorm inputs with their statistics (2 (d + 2)), attention q, k, v, output
  (4 d) and log-sum-exp (h), GELU input (I), and the projections' inputs (``projection_inputs``:
  q/k/v d, out d, fc1 d, fc2 I);
- decoder layer, per token: three LayerNorm inputs (3 (d + 2)), self-attention q, k, v, output
  (4 d + h), cross-attention q and output (2 d + h), GELU input (I), and the inputs of self q/k/v,
  self out, cross q, cross out, fc1 (d each) and fc2 (I);
- decoder layer, per encoder frame: the cross-attention's keys and values (2 d), their LoRA A
  outputs, and the encoder's output once for all layers (the input k and v project).

A full fine-tune also trains the convolutional front end (its inputs, 2 mel + 5 d per frame) and
keeps each stack's final LayerNorm input; with LoRA the front end runs below every adapter, so no
gradient reaches it (forward FLOPs only).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

from trainer_core.preflight.memory import projection_inputs
from trainer_core.preflight.stacks import Stack, layer_names
from trainer_core.vocabulary import TrainingType

# Working buffers = this x the saved activations, fitted on forward + backward passes of whisper-tiny's
# shape at batch 1, 2 and 4 in one process (RSS growth 0.26 GiB + 2.3 x saved: glibc's heap keeps the
# freed 9-37 MB buffers of 1500-frame layers; with MALLOC_MMAP_THRESHOLD_=131072 it is 1.34 x saved, the
# text LM's share). The 0.26 GiB is within the CPU runtime (a speech worker's peak RSS is 0.62 GiB tiny).
WORKING_SHARE = 1.3
READ_SECONDS_PER_AUDIO_SECOND = 0.004  # decode + resample + log-mel features, once a clip (kept after the first epoch)
ENCODER_LAYERS = "model.encoder.layers"
DECODER_LAYERS = "model.decoder.layers"
SELF = ("self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj")
CROSS_KV = ("encoder_attn.k_proj", "encoder_attn.v_proj")


@dataclass(frozen=True)
class Batch:
    """What a set of rows puts through the model: ``clips`` (one window each), ``tokens`` (decoder
    positions) and ``row_tokens`` (one row's decoder positions, what self-attention spans)."""

    clips: int
    tokens: int
    row_tokens: float

    @classmethod
    def of(cls, split: Any) -> Batch:
        """All the rows of a split (its ``ClipSplitStats``): an epoch's clips and decoder tokens."""
        return cls(split.rows, split.total_tokens, split.total_tokens / max(split.rows, 1))


def _adapted(request: Any, adapted: tuple[str, ...]) -> tuple[frozenset[str], frozenset[str]]:
    """(encoder layer, decoder layer) names given adapters; every projection for a full fine-tune."""
    if request.training_type == TrainingType.full:
        every = frozenset(
            (*SELF, "self_attn.out_proj", "fc1", "fc2", "encoder_attn.q_proj", "encoder_attn.out_proj", *CROSS_KV)
        )
        return every, every
    return layer_names(adapted, ENCODER_LAYERS), layer_names(adapted, DECODER_LAYERS)


def whisper_stacks(config: Any, request: Any, adapted: tuple[str, ...], batch: Batch) -> list[Stack]:
    """The stacks of ``config``'s Whisper over ``batch``: the front end, the encoder, the decoder
    and its cross-attention's keys and values over the frames (see the module docstring)."""
    d, frames, mel = config.d_model, config.max_source_positions, config.num_mel_bins
    full = request.training_type == TrainingType.full
    encoder_names, decoder_names = _adapted(request, adapted)
    ffn_e, ffn_d, h_e, h_d = (
        config.encoder_ffn_dim,
        config.decoder_ffn_dim,
        config.encoder_attention_heads,
        config.decoder_attention_heads,
    )
    encoder_groups = {SELF: d, ("self_attn.out_proj",): d, ("fc1",): d, ("fc2",): ffn_e}
    decoder_groups = {
        SELF: d,
        ("self_attn.out_proj",): d,
        ("encoder_attn.q_proj",): d,
        ("encoder_attn.out_proj",): d,
        ("fc1",): d,
        ("fc2",): ffn_d,
    }
    kv = [name for name in CROSS_KV if name in decoder_names]
    kv_input = bool(kv) and (full or request.lora_dropout == 0)  # the encoder's output, kept once for every layer
    kv_saved = 2 * d + (0 if full else request.lora_r * len(kv) + 2 * d * len(kv) * (request.lora_dropout > 0))
    positions = batch.clips * frames
    final_norm = (d + 2) * full  # with LoRA the first layer's norm input is not kept: it evens out the final one's
    ids = 2 * full  # a trained decoder embedding keeps its input ids (int64: two fp32 values)
    return [
        Stack("front end", 1, d, positions, saved=2 * mel + 5 * d, matmul=6 * mel * d + 3 * d * d, grad=full),
        Stack(
            "encoder",
            config.encoder_layers,
            d,
            positions,
            saved=2 * (d + 2) + 4 * d + h_e + ffn_e + projection_inputs(encoder_groups, encoder_names, request),
            once=final_norm,
            matmul=config.encoder_layers * (4 * d * d + 2 * d * ffn_e),
            attention=config.encoder_layers * d * frames,
        ),
        Stack(
            "decoder",
            config.decoder_layers,
            d,
            batch.tokens,
            saved=3 * (d + 2) + 6 * d + 2 * h_d + ffn_d + projection_inputs(decoder_groups, decoder_names, request),
            once=final_norm + ids,
            matmul=config.decoder_layers * (6 * d * d + 2 * d * ffn_d) + config.vocab_size * d,
            attention=config.decoder_layers * d * round(batch.row_tokens + frames),
        ),
        Stack(
            "cross-attention keys and values",
            config.decoder_layers,
            d,
            positions,
            saved=kv_saved,
            once=d * kv_input,
            matmul=config.decoder_layers * 2 * d * d,
        ),
    ]


def estimates(request: Any, folder: Optional[Path], data: Any, plan: Any) -> dict[str, Any]:
    """The check report's estimate fields (``stack_costs.report_fields``) of a Whisper run on ``data``
    (``ClipSplits``) with ``plan``; or ``no_estimates`` saying why not (``stacks.counted_model``)."""
    from trainer_core.preflight.costs import training_device
    from trainer_core.preflight.stack_costs import memory_estimate, report_fields, split_time
    from trainer_core.preflight.stacks import counted_model

    found = counted_model(folder, request)
    if isinstance(found, str):
        return {"no_estimates": found}
    config, _, counts = found
    stats, device = data.stats, training_device()
    rows = min(request.batch_size, stats.rows)
    longest = Batch(rows, rows * stats.longest_tokens, stats.longest_tokens)
    memory = memory_estimate(
        request,
        counts,
        whisper_stacks(config, request, counts.adapted, longest),
        longest.tokens * config.vocab_size,
        device,
        f"{rows} clips of {config.max_source_positions} encoder frames and {longest.tokens} decoder tokens",
        WORKING_SHARE,
    )
    time_ = split_time(
        request,
        counts,
        data,
        plan,
        lambda split: whisper_stacks(config, request, counts.adapted, Batch.of(split)),
        stats.total_tokens + stats.rows * config.max_source_positions,
        device,
        READ_SECONDS_PER_AUDIO_SECOND * stats.seconds,
    )
    return report_fields(memory, time_)
