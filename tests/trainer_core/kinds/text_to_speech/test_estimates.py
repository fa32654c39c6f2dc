"""The text-to-speech check's memory and time estimates (``kinds.text_to_speech.estimates``): the
values autograd saves in CSM's two stacks, counted tensor by tensor, near the LLaMA-layout formula;
the codec's FLOPs as torch counts them; the estimates grow with the clips, the steps and the LoRA
rank; the check shows them."""

from __future__ import annotations

import time

import pytest

from bench.csm_model import ROWS
from tests.support.speech_data import speech_request
from tests.support.tts_data import tts_file
from trainer_core.kinds.text_to_speech.check import tts_report
from trainer_core.kinds.text_to_speech.estimates import Batch, codec_flops_per_second, csm_stacks
from trainer_core.kinds.text_to_speech.kind import TEXT_TO_SPEECH


def _saved(model, batch) -> dict[str, int]:
    """fp32 values autograd saves in one training forward of ``model`` on ``batch``, in the backbone's
    and the depth decoder's layers (weights left out)."""
    import torch

    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    where = {"part": "other"}
    for part, module in (
        ("backbone", base.backbone_model),
        ("head", base.lm_head),
        ("depth decoder", base.depth_decoder.model),
        ("head", base.depth_decoder.codebooks_head),
    ):
        module.register_forward_pre_hook(lambda *_, part=part: where.update(part=part))
    weights = {p.untyped_storage().data_ptr() for p in model.parameters()}
    seen: set[int] = set()
    found: dict[str, int] = {}

    def pack(tensor):
        storage = tensor.untyped_storage()
        if storage.data_ptr() not in weights | seen:
            seen.add(storage.data_ptr())
            found[where["part"]] = found.get(where["part"], 0) + storage.nbytes() // 4
        return tensor

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda tensor: tensor):
        model(**batch)
    return found


def test_the_saved_values_and_the_codec_flops_are_near_what_torch_counts(tiny_csm_dir, tmp_path):
    import torch
    from torch.utils.flop_counter import FlopCounterMode
    from transformers import CsmForConditionalGeneration

    from trainer_core.kinds.text_to_speech.collator import TtsCollator
    from trainer_core.kinds.text_to_speech.data import prepare_tts_data
    from trainer_core.kinds.text_to_speech.serve import load_processor
    from trainer_core.preflight.stacks import count_model, meta_model
    from trainer_core.training.wiring import add_lora

    request = speech_request(tiny_csm_dir, tts_file(tmp_path / "data"), max_seq_length=512)
    processor = load_processor(tiny_csm_dir)
    rows = prepare_tts_data(request, processor).train
    batch = TtsCollator(processor)([dict(row) for row in rows])
    model = CsmForConditionalGeneration.from_pretrained(tiny_csm_dir)
    counts = count_model(meta_model(model.config, TEXT_TO_SPEECH), request, frozen=("codec_model",))
    config = model.config
    with FlopCounterMode(display=False) as counter, torch.no_grad():
        model.codec_model.encode(torch.randn(1, 1, 2 * config.codec_config.sampling_rate))
    assert codec_flops_per_second(model, config) == pytest.approx(counter.get_total_flops() / 2, rel=0.01)
    saved = _saved(add_lora(request, model, task_type=False)[0].train(), batch)
    positions, frames = batch["input_ids"].numel(), int((batch["labels"] != -100).sum())
    stacks = csm_stacks(config, request, counts.adapted, Batch(positions, frames, positions / len(rows), 0.0), 0.0)
    for stack in stacks[:2]:  # the backbone keeps the padding mask too (T values a position, not counted)
        assert stack.saved_values(False) == pytest.approx(saved[stack.name], rel=0.15)


def test_the_estimates_grow_with_clips_steps_and_rank_and_the_check_shows_them(tiny_csm_dir, tmp_path, monkeypatch):
    monkeypatch.setattr(
        "trainer_core.preflight.stack_costs.machine_gflops", lambda device: 0.5
    )  # seconds far above the 0.1 s rounding
    from ui.preflight_view import report_html

    one = tts_file(tmp_path / "one", rows=ROWS[:1])
    two = tts_file(tmp_path / "two")

    def report(data, **fields):
        fields = {"max_seq_length": 512, "max_steps": 0, "num_epochs": 100, **fields}  # enough steps to time
        request = speech_request(tiny_csm_dir, data, **fields)
        found = tts_report(request, tiny_csm_dir, time.perf_counter(), TEXT_TO_SPEECH)
        assert found.errors == [] and found.no_estimates is None
        return found

    small, more = report(one, batch_size=1), report(two, batch_size=1)
    assert more.time.parts_seconds["train_steps"] > 2 * small.time.parts_seconds["train_steps"]
    wider = report(two, batch_size=2)
    assert wider.memory.parts_gib["activations"] > 1.9 * more.memory.parts_gib["activations"]
    longer = report(two, batch_size=1, num_epochs=300)
    assert longer.time.parts_seconds["train_steps"] == pytest.approx(
        3 * more.time.parts_seconds["train_steps"], rel=0.05
    )
    ranked = report(two, batch_size=1, lora_r=64)
    for part in ("trainable_parameters", "optimizer_state", "activations"):
        assert ranked.memory.parts_gib[part] > more.memory.parts_gib[part]
    assert "backbone, depth decoder, codec" in wider.time.speed_source
    assert "Run time ≈" in report_html(wider) and f"Peak memory ≈ {wider.memory.total_gib:.2f} GiB" in report_html(
        wider
    )
