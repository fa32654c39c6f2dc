"""The speech-to-text check's memory and time estimates (``kinds.speech_to_text.estimates``): the
values autograd saves, counted tensor by tensor on random Whispers, equal the stacks' formula; the
estimates grow with the clips, the steps and the LoRA rank; the check shows them."""

from __future__ import annotations

import time

import pytest

from tests.support.speech_data import ROWS, speech_file, speech_request
from trainer_core.kinds.speech_to_text.check import speech_report
from trainer_core.kinds.speech_to_text.estimates import Batch, whisper_stacks
from trainer_core.kinds.speech_to_text.kind import SPEECH_TO_TEXT
from trainer_core.preflight.stacks import count_model
from trainer_core.schemas import TrainingStartRequest


def _saved_by_stack(model, frames: int, tokens: int) -> dict[str, int]:
    """fp32 values autograd saves in one training forward of ``model`` (batch 1), by where they are
    saved (the encoder with its front end, the decoder with its cross-attention); weights left out."""
    import torch

    where = {"part": "encoder"}
    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    base.model.decoder.register_forward_pre_hook(lambda *_: where.update(part="decoder"))
    base.proj_out.register_forward_pre_hook(lambda *_: where.update(part="head"))
    weights = {p.untyped_storage().data_ptr() for p in model.parameters()}
    seen: set[int] = set()
    found = {"encoder": 0, "decoder": 0, "head": 0}

    def pack(tensor):
        storage = tensor.untyped_storage()
        if storage.data_ptr() not in weights | seen:
            seen.add(storage.data_ptr())
            found[where["part"]] += storage.nbytes() // 4
        return tensor

    config = base.config
    ids = torch.randint(0, config.vocab_size, (1, tokens))
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda tensor: tensor):
        model(input_features=torch.randn(1, config.num_mel_bins, 2 * frames), decoder_input_ids=ids, labels=ids)
    return found


@pytest.mark.parametrize("training_type", ["lora", "full"])
def test_the_saved_values_are_the_formulas(training_type):
    import torch
    from transformers import WhisperConfig, WhisperForConditionalGeneration

    from trainer_core.training.wiring import add_lora

    config = WhisperConfig(
        d_model=64,
        encoder_layers=3,
        decoder_layers=2,
        encoder_attention_heads=4,
        decoder_attention_heads=4,
        encoder_ffn_dim=96,
        decoder_ffn_dim=128,
        max_source_positions=120,
        max_target_positions=64,
        vocab_size=300,
        pad_token_id=0,
        bos_token_id=1,
        eos_token_id=1,
        decoder_start_token_id=2,
    )
    request = TrainingStartRequest(model_name="x", local_datasets=["a.json"], training_type=training_type, lora_r=8)
    torch.manual_seed(0)
    model = WhisperForConditionalGeneration(config)
    counts = count_model(model, request)
    model = add_lora(request, model, task_type=False)[
        0
    ].train()  # as the run adapts it (no adapter for a full fine-tune)
    saved = _saved_by_stack(model, 120, 16)
    front, encoder, decoder, cross = (
        s.saved_values(False) for s in whisper_stacks(config, request, counts.adapted, Batch(1, 16, 16))
    )
    assert saved["encoder"] == front + encoder
    assert saved["decoder"] == pytest.approx(decoder + cross, rel=1e-3)  # full: 2 values a token apart (ids)


def test_the_estimates_grow_with_clips_steps_and_rank_and_the_check_shows_them(tiny_whisper_dir, tmp_path, monkeypatch):
    monkeypatch.setattr(
        "trainer_core.preflight.stack_costs.machine_gflops", lambda device: 0.5
    )  # seconds far above the 0.1 s rounding
    from trainer_core.cli.check import render
    from ui.preflight_view import report_html

    two = speech_file(tmp_path / "two", ROWS[:2])
    four = speech_file(tmp_path / "four", ROWS)

    def report(data, **fields):
        fields = {"max_steps": 0, "num_epochs": 50, **fields}  # enough steps to time (seconds are rounded to 0.1)
        request = speech_request(tiny_whisper_dir, data, **fields)
        found = speech_report(request, tiny_whisper_dir, time.perf_counter(), SPEECH_TO_TEXT)
        assert found.errors == [] and found.no_estimates is None
        return found

    small, more_clips = report(two), report(four)
    assert more_clips.time.parts_seconds["train_steps"] > 1.9 * small.time.parts_seconds["train_steps"]
    assert more_clips.memory.parts_gib == small.memory.parts_gib  # the longest batch: 2 clips either way
    wider = report(four, batch_size=4)
    assert wider.memory.parts_gib["activations"] > 1.9 * more_clips.memory.parts_gib["activations"]
    longer = report(four, num_epochs=150)
    assert longer.time.parts_seconds["train_steps"] == pytest.approx(
        3 * more_clips.time.parts_seconds["train_steps"], rel=0.05
    )
    ranked = report(four, lora_r=64)
    for part in ("trainable_parameters", "optimizer_state", "activations"):
        assert ranked.memory.parts_gib[part] > more_clips.memory.parts_gib[part]
    assert "4 clips of 400 encoder frames" in wider.memory.basis
    assert f"Peak memory ≈ {wider.memory.total_gib:.2f} GiB" in report_html(wider)
    assert f"Memory: about {wider.memory.total_gib:.2f} GiB" in render(wider, colour=False)
