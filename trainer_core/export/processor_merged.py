"""Merged export of a kind whose model comes with a processor and is checked by a measure of its own
(speech-to-text: greedy transcripts of check clips; text-to-speech: the reconstruction loss of a
check clip): the run loaded in float32, measured (the reference), the adapter merged
(``weights.merge``: ``merge_and_unload``; a full fine-tune's own weights), saved in the chosen
dtype with its processor, loaded back by the folder's kind's class and measured again; the kind's
``compare`` judges the two measures. The card is the shared one (``job.write_card``: the folder's
kind gives its Hub ``pipeline_tag`` and usage)."""

from __future__ import annotations

import gc
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from trainer_core.export import job as jobs
from trainer_core.export.schemas import CheckResult, ExportResult
from trainer_core.export.weights import load_causal_lm, load_run, merge


@dataclass(frozen=True)
class MergedCheck:
    """A kind's check of its merged folder: ``measure(model, processor)`` (any value ``compare``
    reads), ``compare(dtype, want, got)`` -> CheckResult, the progress lines of the two measures
    (``reference``: the run as trained; ``check``: the folder loaded back)."""

    measure: Callable[[Any, Any], Any]
    compare: Callable[[str, Any, Any], CheckResult]
    reference: str
    check: str


def export_merged_with_processor(job: jobs.ExportJob, check: MergedCheck) -> ExportResult:
    """Write the merged model and its processor into ``job.out`` and check it by ``check`` (see the
    module docstring). Raises what the text path's loading raises (ModelLoadError)."""
    dtype = job.request.dtype
    job.progress.begin("load", 0.02, f"Loading {job.choice.id} in float32")
    run = load_run(job.choice, job.models_dir, qlora=job.qlora)
    job.progress.begin("reference", 0.15, check.reference)
    want = check.measure(run.model, run.processor)
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
    job.progress.begin("check", 0.65, check.check)
    back = load_causal_lm(job.out, "float32")  # the folder's kind's class (ModelKind.model_class)
    result = check.compare(dtype, want, check.measure(back, run.processor))
    del back
    gc.collect()
    files = [f.name for f in jobs.listing(job.out)] + ["README.md"]
    (job.out / "README.md").write_text(jobs.write_card(job, files, result, dtype), encoding="utf-8")
    return jobs.result(job, result, dtype)
