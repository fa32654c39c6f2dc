"""Export of a text-to-speech run (``TextToSpeechKind.exporter``).

- **merged** (``export.processor_merged``): the adapter merged into its base (``merge_and_unload``) and
  saved whole in the chosen dtype with its processor (feature extractor, tokenizer, chat template)
  and generation config (the depth decoder's inside it), a folder ``CsmForConditionalGeneration`` /
  ``AutoProcessor`` load by themselves. The codec's weights are saved as they were (never trained).
  Checked by loading it back and scoring ``CHECK_TEXT`` said as a synthetic clip (so no data file is
  needed) beside the run as trained (float32): the two reconstruction losses must agree within
  ``TOLERANCE[dtype]``. The card names the Hub's pipeline, ``text-to-speech`` (the kind's
  ``pipeline_tag``), and says how to make speech with the folder (``card_usage``).
- **adapter**: the text path's zip (the adapter and the run's files).
- **GGUF**: refused (``GGUF_REASON``): llama.cpp's converter writes no CSM.
"""

from __future__ import annotations

from typing import Any

from trainer_core.export import job as jobs
from trainer_core.export.processor_merged import MergedCheck, export_merged_with_processor
from trainer_core.export.schemas import CheckResult, ExportResult
from trainer_core.kinds.text_to_speech.scoring import reconstruction_loss

GGUF_REASON = (
    "text-to-speech models (CSM) cannot be exported as GGUF: llama.cpp's converter does not write the CSM "
    "architecture (its backbone, depth decoder and Mimi codec); export the merged model or the adapter instead"
)
CHECK_TEXT = "This is the export's check."
CHECK_SECONDS = 1.0  # the check clip's length
CHECK_TONE = 220.0  # Hz
TOLERANCE = {"float32": 1e-4, "float16": 2e-2, "bfloat16": 5e-2}  # the losses' relative difference accepted


def check_clip(sampling_rate: int) -> Any:
    """``CHECK_TONE`` for ``CHECK_SECONDS`` at ``sampling_rate``, with seeded noise (float32 mono)."""
    import numpy as np

    rng = np.random.default_rng(0)
    t = np.arange(int(CHECK_SECONDS * sampling_rate)) / sampling_rate
    return (0.3 * np.sin(2 * np.pi * CHECK_TONE * t) + 0.01 * rng.standard_normal(t.size)).astype(np.float32)


def compare(dtype: str, want: float, got: float) -> CheckResult:
    """The check: the merged model's loss within ``TOLERANCE[dtype]`` (relative) of the run's."""
    difference = abs(got - want) / max(abs(want), 1e-8)
    need = TOLERANCE.get(dtype, 5e-2)
    return CheckResult(
        passed=difference <= need,
        summary=f"{dtype}: reconstruction loss {got:.4f} against the run's {want:.4f} ({difference:.2%} apart)",
        checked_by="transformers",
        required=f"the loss on a check clip within {need:.2%} of the run's",
    )


def card_usage(request: dict) -> list[str]:
    """The card's usage of a merged folder, as transformers' CSM docs write it: speaker 0 says a
    sentence (the chat template's speaker turn), ``generate(output_audio=True)``, saved as a wav."""
    return [
        "from transformers import AutoProcessor, CsmForConditionalGeneration",
        "",
        'processor = AutoProcessor.from_pretrained("PATH_TO_THIS_FOLDER")',
        'model = CsmForConditionalGeneration.from_pretrained("PATH_TO_THIS_FOLDER")',
        'conversation = [{"role": "0", "content": [{"type": "text", "text": "Hello from the fine-tuned voice."}]}]',
        "inputs = processor.apply_chat_template(conversation, tokenize=True, return_dict=True)",
        "audio = model.generate(**inputs, output_audio=True)",
        'processor.save_audio(audio, "speech.wav")',
    ]


def check_loss(model: Any, processor: Any) -> float:
    """``model``'s reconstruction loss on ``CHECK_TEXT`` said as ``check_clip`` (speaker 0)."""
    rows = [{"audio": check_clip(processor.feature_extractor.sampling_rate), "text": CHECK_TEXT, "speaker": 0}]
    return reconstruction_loss(model, processor, rows)


CHECK = MergedCheck(
    measure=check_loss,
    compare=compare,
    reference="Scoring the check clip with the run as trained",
    check="Loading the saved model back and scoring the check clip",
)


def export_merged(job: jobs.ExportJob) -> ExportResult:
    """Write the merged model and its processor into ``job.out`` and check it (see the module
    docstring). Raises what the text path's loading raises (ModelLoadError)."""
    return export_merged_with_processor(job, CHECK)
