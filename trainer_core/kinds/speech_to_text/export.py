"""Export of a speech-to-text run (``SpeechToTextKind.exporter``).

- **merged**: the adapter merged into its base (``export.weights.merge``: ``merge_and_unload``) and
  saved whole in the chosen dtype with its processor (feature extractor + tokenizer) and generation
  config, a folder ``AutoModelForSpeechSeq2Seq`` / ``AutoProcessor`` load by themselves. Checked by
  loading it back and transcribing ``CHECK_CLIPS`` (synthetic tones, so no data file is needed)
  greedily beside the run as trained (float32): the generated tokens compared one by one.
- **adapter**: the text path's zip (the adapter and the run's files).
- **GGUF**: refused (``GGUF_REASON``): llama.cpp's converter writes no Whisper (whisper.cpp has its
  own ggml format and converter).
"""

from __future__ import annotations

import gc
from typing import Any

from trainer_core.export import job as jobs
from trainer_core.export.schemas import CheckResult, ExportResult
from trainer_core.export.weights import load_causal_lm, load_run, merge

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


def export_merged(job: jobs.ExportJob) -> ExportResult:
    """Write the merged model and its processor into ``job.out`` and check it (see the module
    docstring). Raises what the text path's loading raises (ModelLoadError)."""
    dtype = job.request.dtype
    job.progress.begin("load", 0.02, f"Loading {job.choice.id} in float32")
    run = load_run(job.choice, job.models_dir, qlora=job.qlora)
    clips = check_clips(run.processor.feature_extractor.sampling_rate)
    job.progress.begin("reference", 0.15, f"Transcribing {len(clips)} check clips with the run as trained")
    want = greedy_tokens(run.model, run.processor, clips)
    job.progress.begin("merge", 0.3, "Merging the adapter into the base" if job.choice.adapter else "Preparing")
    model, notes = merge(run, dtype)
    job.notes.extend(notes)
    run.model = None
    job.progress.begin("save", 0.45, f"Saving the merged model in {dtype} with its processor")
    job.out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(job.out)
    run.processor.save_pretrained(job.out)
    del model
    gc.collect()
    job.progress.begin("check", 0.65, "Loading the saved model back and transcribing the check clips")
    back = load_causal_lm(job.out, "float32")  # the folder's kind's class: AutoModelForSpeechSeq2Seq
    check = compare(dtype, want, greedy_tokens(back, run.processor, clips))
    del back
    gc.collect()
    files = [f.name for f in jobs.listing(job.out)] + ["README.md"]
    (job.out / "README.md").write_text(jobs.write_card(job, files, check, dtype), encoding="utf-8")
    return jobs.result(job, check, dtype)
