"""Export of a speech-to-text run (``SpeechToTextKind.exporter``).

- **merged** (``export.processor_merged``): the adapter merged into its base (``merge_and_unload``) and
  saved whole in the chosen dtype with its processor (feature extractor + tokenizer) and generation
  config, a folder ``AutoModelForSpeechSeq2Seq`` / ``AutoProcessor`` load by themselves. Checked by
  loading it back and transcribing ``CHECK_CLIPS`` (synthetic tones, so no data file is needed)
  greedily beside the run as trained (float32): the generated tokens compared one by one. The card
  names the Hub's pipeline, ``automatic-speech-recognition``, and says how to transcribe a file with
  the folder (``card_usage``).
- **adapter**: the text path's zip (the adapter and the run's files).
- **GGUF**: refused (``GGUF_REASON``): llama.cpp's converter writes no Whisper (whisper.cpp has its
  own ggml format and converter).
"""

from __future__ import annotations

from typing import Any

from trainer_core.export import job as jobs
from trainer_core.export.card import clip_lines
from trainer_core.export.processor_merged import MergedCheck, export_merged_with_processor
from trainer_core.export.schemas import CheckResult, ExportResult

GGUF_REASON = (
    "speech-to-text models (Whisper) cannot be exported as GGUF: llama.cpp's converter does not write the "
    "Whisper architecture (whisper.cpp has its own ggml format and converter); export the merged model or the "
    "adapter instead"
)
CHECK_SECONDS = 2.0  # each check clip's length
CHECK_TONES = (220.0, 440.0)  # Hz: one synthetic clip a tone, with a little noise
AGREEMENT = {"float32": 1.0, "float16": 0.9, "bfloat16": 0.9}  # share of equal tokens the check accepts


def check_clips(sampling_rate: int) -> list[Any]:
    """``CHECK_TONES`` as mono float32 clips of ``CHECK_SECONDS`` at ``sampling_rate`` (seeded noise)."""
    import numpy as np

    rng = np.random.default_rng(0)
    t = np.arange(int(CHECK_SECONDS * sampling_rate)) / sampling_rate
    return [
        (0.3 * np.sin(2 * np.pi * hz * t) + 0.01 * rng.standard_normal(t.size)).astype(np.float32) for hz in CHECK_TONES
    ]


def greedy_tokens(model: Any, processor: Any, clips: list[Any]) -> list[list[int]]:
    """Each clip's greedily generated token ids (special tokens included) by ``model``."""
    import torch

    extractor = processor.feature_extractor
    found = []
    for clip in clips:
        features = extractor([clip], sampling_rate=extractor.sampling_rate, return_tensors="pt").input_features
        features = features.to(next(model.parameters()).dtype)
        with torch.inference_mode():
            found.append(model.generate(input_features=features, do_sample=False)[0].tolist())
    return found


def compare(dtype: str, want: list[list[int]], got: list[list[int]]) -> CheckResult:
    """The check: tokens equal position by position (the longer answer's extra tokens count as
    different), passed when their share is at least ``AGREEMENT[dtype]``."""
    equal = sum(sum(1 for a, b in zip(w, g) if a == b) for w, g in zip(want, got))
    total = sum(max(len(w), len(g)) for w, g in zip(want, got))
    same = sum(1 for w, g in zip(want, got) if w == g)
    need = AGREEMENT.get(dtype, 0.9)
    return CheckResult(
        passed=total > 0 and equal / total >= need,
        summary=f"{dtype}: {same}/{len(want)} check clips, {equal}/{total} tokens equal",
        checked_by="transformers",
        prompts_equal=same,
        prompts_total=len(want),
        tokens_equal=equal,
        tokens_total=total,
        required=f"at least {need:.0%} of the generated tokens equal to the run's",
    )


def card_usage(request: dict) -> list[str]:
    """The card's usage of a merged folder: transformers' speech recognition pipeline on a clip read
    at the feature extractor's rate, with the run's language and task (``request``)."""
    options = {"task": request.get("task") or "transcribe"}
    if request.get("language"):
        options = {"language": request["language"], **options}
    return [
        "import soundfile as sf",
        "import soxr",
        "from transformers import pipeline",
        "",
        'asr = pipeline("automatic-speech-recognition", model="PATH_TO_THIS_FOLDER")',
        "rate = asr.feature_extractor.sampling_rate",
        *clip_lines("speech.wav", "rate"),
        f'print(asr({{"raw": audio, "sampling_rate": rate}}, generate_kwargs={options!r})["text"])',
    ]


def check_tokens(model: Any, processor: Any) -> list[list[int]]:
    """``model``'s greedy tokens of each of ``check_clips`` at its feature extractor's rate."""
    return greedy_tokens(model, processor, check_clips(processor.feature_extractor.sampling_rate))


CHECK = MergedCheck(
    measure=check_tokens,
    compare=compare,
    reference=f"Transcribing {len(CHECK_TONES)} check clips with the run as trained",
    check="Loading the saved model back and transcribing the check clips",
)


def export_merged(job: jobs.ExportJob) -> ExportResult:
    """Write the merged model and its processor into ``job.out`` and check it (see the module
    docstring). Raises what the text path's loading raises (ModelLoadError)."""
    return export_merged_with_processor(job, CHECK)
