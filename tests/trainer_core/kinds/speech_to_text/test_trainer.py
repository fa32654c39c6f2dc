"""Whisper runs through the worker's own ``train()`` (load, data, Seq2SeqTrainer, save): a LoRA run
on the shared clips whose adapters sit in both the encoder's and the decoder's blocks and whose
saved folder holds the processor; a full fine-tune whose weights change; the data line's words."""

from __future__ import annotations

import json
import queue
import threading

import torch
from safetensors.torch import load_file

from tests.support.speech_data import speech_file, speech_request
from trainer_core.kinds.speech_to_text.targets import speech_targets
from trainer_core.kinds.speech_to_text.trainer import decoder_length
from trainer_core.training.worker import EventKind, train


def _events(events: queue.Queue) -> list[tuple[str, dict]]:
    found = []
    while not events.empty():
        found.append(events.get())
    return found


def test_a_lora_run_adapts_encoder_and_decoder_and_saves_the_processor(tiny_whisper_dir, tmp_path):
    request = speech_request(tiny_whisper_dir, speech_file(tmp_path / "data"), language="en", task="transcribe")
    out, events = tmp_path / "run", queue.Queue()
    assert train(request, "job-whisper", out, events, threading.Event()) == ("completed", None)
    found = _events(events)
    losses = [p["loss"] for kind, p in found if kind == EventKind.PROGRESS and p["loss"] is not None]
    assert len(losses) == 3 and all(0 < loss < 20 for loss in losses)
    line = next(p["message"] for kind, p in found if kind == EventKind.INFO and "clips" in p.get("message", ""))
    assert "4 rows, 68 tokens (52 trained)" in line and "Whisper: 4 clips, 17.8 s of audio" in line
    adapter = json.loads((out / "adapter_config.json").read_text())
    adapted = json.loads((out / "run.json").read_text())["model_structure"]["adapted"]
    assert adapted["count"] == 2 * 6 + 2 * 10  # encoder: q/k/v/out_proj, fc1, fc2; decoder: + encoder_attn's four
    assert "model.decoder.layers.1.encoder_attn.q_proj" in adapted["outside"]
    assert adapter["task_type"] is None
    weights = load_file(out / "adapter_model.safetensors")
    assert any("decoder.layers.1.fc2.lora_B" in name for name in weights)
    assert any(w.abs().sum() > 0 for name, w in weights.items() if "lora_B" in name)  # B moved off zero
    saved = json.loads((out / "processor_config.json").read_text())
    assert saved["feature_extractor"]["feature_size"] == 80


def test_a_full_fine_tune_changes_the_weights(tiny_whisper_dir, tmp_path):
    request = speech_request(
        tiny_whisper_dir, speech_file(tmp_path / "data"), training_type="full", max_steps=1, batch_size=4
    )
    out = tmp_path / "run"
    assert train(request, "job-whisper-full", out, queue.Queue(), threading.Event()) == ("completed", None)
    before, after = load_file(tiny_whisper_dir / "model.safetensors"), load_file(out / "model.safetensors")
    name = "model.decoder.layers.0.fc1.weight"
    assert not torch.equal(before[name], after[name])
    assert json.loads((out / "config.json").read_text())["architectures"] == ["WhisperForConditionalGeneration"]


def test_the_targets_are_both_stacks_projections_by_the_shared_rule(tiny_whisper_dir, tmp_path):
    from transformers import AutoModelForSpeechSeq2Seq

    model = AutoModelForSpeechSeq2Seq.from_pretrained(tiny_whisper_dir)
    request = speech_request(tiny_whisper_dir, tmp_path / "x.json", max_seq_length=512)
    targets = speech_targets(model, request)
    assert targets.blocks == "model.encoder.layers" and set(targets.modules) == {
        "self_attn.q_proj",
        "self_attn.k_proj",
        "self_attn.v_proj",
        "self_attn.out_proj",
        "fc1",
        "fc2",
    }
    assert len(targets.decoder) == 20 and "model.decoder.layers.0.encoder_attn.k_proj" in targets.decoder
    assert targets.count == 32 and targets.summary().endswith("and 20 in the decoder's blocks")
    attention_only = speech_targets(
        model, speech_request(tiny_whisper_dir, tmp_path / "x.json", finetune_mlp_modules=False)
    )
    assert (
        not any(path.endswith(("fc1", "fc2")) for path in attention_only.decoder) and len(attention_only.decoder) == 16
    )
    assert (
        speech_targets(model, speech_request(tiny_whisper_dir, tmp_path / "x.json", target_modules=["q_proj"])) is None
    )
    assert decoder_length(request, model) == 128  # the model's max_target_positions, below max_seq_length
