"""A speech-to-text run's exports through the export worker (``export.worker.export``, in-process):
the merged folder (adapter merged, the processor beside it) loads with transformers' auto classes
alone and transcribes the check clips as the run does; GGUF refused before anything is converted,
with the reason (llama.cpp's converter writes no Whisper)."""

from __future__ import annotations

import json
from pathlib import Path

import torch

from tests.support.exports import run_export
from tests.support.speech_runs import lora_speech_run
from trainer_core.export.schemas import ExportRequest
from trainer_core.export.start import export_refusal
from trainer_core.kinds.speech_to_text.export import GGUF_REASON, check_clips
from trainer_core.serving.choices import weights_choice
from trainer_core.settings import get_settings


def _choice(run: Path, base: Path):
    return weights_choice(run, "final", "job_stt", str(base), get_settings().models_dir, job_id="job_stt")


def test_the_merged_folder_loads_alone_and_transcribes_as_the_run(tiny_whisper_dir, tmp_path):
    from peft import PeftModel
    from transformers import AutoModelForSpeechSeq2Seq, AutoProcessor

    run = lora_speech_run(tiny_whisper_dir, tmp_path / "job_stt")
    (run / "request.json").write_text(json.dumps({"model_name": str(tiny_whisper_dir)}), encoding="utf-8")
    result, _ = run_export(run, tiny_whisper_dir, "merged", tmp_path / "out", dtype="float32")
    out = tmp_path / "out"
    assert result.passed and result.check.checked_by == "transformers"
    assert result.check.tokens_equal == result.check.tokens_total > 0 and result.check.prompts_total == 2
    names = {f.name for f in result.files}
    assert {"model.safetensors", "config.json", "processor_config.json", "tokenizer.json", "README.md"} <= names
    assert "adapter_config.json" not in names
    merged = AutoModelForSpeechSeq2Seq.from_pretrained(out).eval()
    processor = AutoProcessor.from_pretrained(out)
    own = PeftModel.from_pretrained(AutoModelForSpeechSeq2Seq.from_pretrained(tiny_whisper_dir), run).eval()
    features = processor.feature_extractor(check_clips(16000)[:1], sampling_rate=16000, return_tensors="pt")
    prompt = torch.tensor([[merged.config.decoder_start_token_id]])
    with torch.inference_mode():  # the merged weights compute what the adapter on its base computes
        want = own(input_features=features.input_features, decoder_input_ids=prompt).logits
        got = merged(input_features=features.input_features, decoder_input_ids=prompt).logits
    assert torch.allclose(got, want, atol=1e-4) and not torch.allclose(
        got,
        AutoModelForSpeechSeq2Seq.from_pretrained(tiny_whisper_dir)(
            input_features=features.input_features, decoder_input_ids=prompt
        ).logits,
        atol=1e-4,
    )


def test_gguf_is_refused_with_the_reason(tiny_whisper_dir, tmp_path):
    settings = get_settings()
    run = lora_speech_run(tiny_whisper_dir, tmp_path / "job_stt")
    problem = export_refusal(
        _choice(run, tiny_whisper_dir),
        ExportRequest(model="job_stt", format="gguf-f16"),
        settings.gguf_converter_dir,
        settings.models_dir,
    )
    assert problem == GGUF_REASON and "llama.cpp's converter does not write the Whisper architecture" in problem
