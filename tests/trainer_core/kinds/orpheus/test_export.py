"""An Orpheus-style run's exports through the export worker (``export.worker.export``, in process):
the merged folder (the LoRA merged into the Llama, checked by the text path's answers) is still an
Orpheus model naming its codec, and its card says how it speaks (the codec's name); GGUF is not
refused (llama.cpp's converter writes the Llama: its check passed on this tiny model, 3/3 prompts
equal, measured by hand; not rerun here, a conversion costs a minute)."""

from __future__ import annotations

import json

from tests.support.exports import run_export
from tests.support.tts_data import lora_orpheus_run, tts_file
from trainer_core.export.schemas import ExportRequest
from trainer_core.export.start import export_refusal
from trainer_core.kinds.orpheus.export import speech_section
from trainer_core.kinds.orpheus.kind import ORPHEUS
from trainer_core.model_kind import kind_for_folder
from trainer_core.serving.choices import weights_choice
from trainer_core.settings import get_settings


def test_the_merged_folder_speaks_with_its_codec_and_gguf_is_allowed(tiny_orpheus_dir, tiny_snac_dir, tmp_path):
    data = tts_file(tmp_path / "data")
    run = lora_orpheus_run(tiny_orpheus_dir, tiny_snac_dir, data, tmp_path / "job_orpheus")
    out = tmp_path / "out"
    result, _ = run_export(run, tiny_orpheus_dir, "merged", out, dtype="float32")
    assert result.passed, result.check.summary
    assert {"model.safetensors", "tokenizer.json", "README.md"} <= {f.name for f in result.files}
    assert kind_for_folder(out) is ORPHEUS
    assert json.loads((out / "tokenizer_config.json").read_text())["audio_codec"] == str(tiny_snac_dir)
    card = (out / "README.md").read_text(encoding="utf-8")
    assert "\n".join(speech_section(str(tiny_snac_dir), "merged")) in card and f"the codec `{tiny_snac_dir}`" in card
    readme = next(f for f in result.files if f.name == "README.md")
    assert readme.size_bytes == (out / "README.md").stat().st_size
    settings = get_settings()
    choice = weights_choice(run, "final", run.name, str(tiny_orpheus_dir), settings.models_dir, job_id=run.name)
    gguf = ExportRequest(model=run.name, format="gguf-f16")
    assert export_refusal(choice, gguf, settings.gguf_converter_dir, settings.models_dir) is None
