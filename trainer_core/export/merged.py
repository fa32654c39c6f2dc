"""Merged export: the adapter merged into its base (``merge_and_unload()``), saved as safetensors
in the chosen dtype with the tokenizer, chat template, generation config and a model card.

Stages (``ExportResult.stage_seconds``; seconds for SmolLM2-135M + LoRA on 2 busy CPU cores, from
``bench/export.py``): load the run in float32 (0.6, or ~8 with the first imports), answer the check
prompts (reference, ~5), merge (QLoRA: into the base loaded unquantized in 16-bit; 1-2.5), cast and
save (0.5-1.3), load the saved folder back in float32 and answer again (check, 1-3), card.
A full fine-tune is its own weights re-saved. The check's rule is ``check.RULES[dtype]`` (a QLoRA
merge is judged by its 16-bit merge dtype's rule).
"""

from __future__ import annotations

import gc

from trainer_core.export import job as jobs
from trainer_core.export.schemas import ExportResult
from trainer_core.export.weights import QLORA_MERGE_DTYPE, load_causal_lm, load_run, merge, save_model


def export_merged(job: jobs.ExportJob) -> ExportResult:
    """Write the merged model into ``job.out`` and check it."""
    dtype = job.request.dtype
    job.progress.begin("load", 0.02, f"Loading {job.choice.id} in float32")
    run = load_run(job.choice, job.models_dir, qlora=job.qlora)
    ref = jobs.reference(job, run.model, run.tokenizer)
    job.progress.begin(
        "merge", 0.3, "Merging the adapter into the base" if job.choice.adapter else "Preparing the model"
    )
    model, notes = merge(run, dtype)
    job.notes.extend(notes)
    run.model = None
    gc.collect()
    job.progress.begin("save", 0.45, f"Saving the merged model in {dtype}")
    save_model(model, run.tokenizer, job.out, run.processor)
    del model
    gc.collect()
    job.progress.begin("check", 0.65, "Loading the saved model back and answering the check prompts")
    back = load_causal_lm(job.out, "float32")
    rule = QLORA_MERGE_DTYPE[dtype] if job.qlora and job.choice.adapter else dtype
    check = jobs.judge(dtype, rule, ref, back, run.tokenizer)
    del back
    gc.collect()
    files = [f.name for f in jobs.listing(job.out)] + ["README.md"]
    (job.out / "README.md").write_text(jobs.write_card(job, files, check, dtype), encoding="utf-8")
    return jobs.result(job, check, dtype)
