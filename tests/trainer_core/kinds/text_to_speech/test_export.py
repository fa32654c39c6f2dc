"""A text-to-speech run's exports through the export worker (``export.worker.export``, in process):
the merged folder (the LoRA merged into the backbone and depth decoder, the processor beside it)
loads with ``CsmForConditionalGeneration`` / ``AutoProcessor`` alone and scores the check clip as
the run does, its card names the ``text-to-speech`` pipeline; GGUF refused before anything is
converted, with the reason (llama.cpp's converter writes no CSM)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support.exports import run_export
from tests.support.tts_data import lora_tts_run
from trainer_core.export.schemas import ExportRequest
from trainer_core.export.start import export_refusal
from trainer_core.kinds.text_to_speech.export import CHECK_TEXT, GGUF_REASON, check_clip
from trainer_core.kinds.text_to_speech.scoring import reconstruction_loss
from trainer_core.serving.choices import weights_choice
from trainer_core.settings import get_settings


def _choice(run: Path, base: Path):
    return weights_choice(run, "final", "job_tts", str(base), get_settings().models_dir, job_id="job_tts")


def test_the_merged_folder_loads_alone_and_scores_as_the_run(tiny_csm_dir, tmp_path):
    from peft import PeftModel
    from transformers import AutoProcessor, CsmForConditionalGeneration

    run = lora_tts_run(tiny_csm_dir, tmp_path / "job_tts")
    (run / "request.json").write_text(json.dumps({"model_name": str(tiny_csm_dir)}), encoding="utf-8")
    out = tmp_path / "out"
    result, _ = run_export(run, tiny_csm_dir, "merged", out, dtype="float32")
    assert result.passed and result.check.checked_by == "transformers", result.check.summary
    names = {f.name for f in result.files}
    assert {"model.safetensors", "config.json", "processor_config.json", "tokenizer.json", "README.md"} <= names
    assert "adapter_config.json" not in names
    assert "pipeline_tag: text-to-speech" in (out / "README.md").read_text(encoding="utf-8")
    merged = CsmForConditionalGeneration.from_pretrained(out).eval()
    processor = AutoProcessor.from_pretrained(out)
    rows = [{"audio": check_clip(processor.feature_extractor.sampling_rate), "text": CHECK_TEXT, "speaker": 0}]
    own = PeftModel.from_pretrained(CsmForConditionalGeneration.from_pretrained(tiny_csm_dir), run).eval()
    want, got = reconstruction_loss(own, processor, rows), reconstruction_loss(merged, processor, rows)
    base = reconstruction_loss(own, processor, rows, use_adapter=False)
    assert got == pytest.approx(want, rel=1e-4) and got != pytest.approx(base, rel=1e-4)  # the adapter is in it


def test_gguf_is_refused_with_the_reason(tiny_csm_dir, tmp_path):
    settings = get_settings()
    run = lora_tts_run(tiny_csm_dir, tmp_path / "job_tts")
    problem = export_refusal(
        _choice(run, tiny_csm_dir),
        ExportRequest(model="job_tts", format="gguf-f16"),
        settings.gguf_converter_dir,
        settings.models_dir,
    )
    assert problem == GGUF_REASON and "does not write the CSM architecture" in problem
