"""GGUF export (f16 or q8_0): the merged model in float32, converted by llama.cpp's converter,
with the chat template, BOS / EOS in its metadata; the merged folder is temporary.

First the model's config.json architecture is checked against the converter's registry (missing:
an ``ExportInputError`` before anything is loaded; the start of an export refuses it already).
Architectures transformers cannot read back from GGUF (``gguf_convert.readable_back``) are
exported with a metadata-only check, which the result's summary and the card say.

Stages: load the run (float32) and answer the check prompts; merge and save the float32 model into
the hidden folder ``.merged`` of the task (removed after conversion); convert
(``gguf_convert.convert``, its output streamed into progress messages); check: the file's
metadata (``gguf_meta``) and its answers once loaded back with ``from_pretrained(gguf_file=...)``
(transformers dequantizes it to float32), by ``check.RULES["f16" | "q8_0"]``; card. Seconds for
SmolLM2-135M + LoRA here (``bench/export.py``): reference ~5, merge ~2, convert 7-10, check 20-26
(mostly transformers' GGUF loader, which parses the file twice).
"""

from __future__ import annotations

import gc
import json
import re
import shutil
from pathlib import Path
from typing import Any, Optional

from trainer_core.export import gguf_convert
from trainer_core.export import job as jobs
from trainer_core.export.gguf_meta import compare_meta, read_meta
from trainer_core.export.schemas import CheckResult, ExportResult
from trainer_core.export.weights import base_dir, load_causal_lm, load_run, merge, save_model

MERGED_DIR = ".merged"
WRITING = re.compile(r"Writing:\s+(\d+)%")


def export_gguf(job: jobs.ExportJob) -> ExportResult:
    """Write ``<stem>-<f16|q8_0>.gguf`` into ``job.out`` and check it."""
    outtype = job.request.format.removeprefix("gguf-")
    missing = gguf_convert.missing_message(job.converter_dir)
    if missing:
        raise jobs.ExportInputError(missing)
    config = _check_architecture(job)
    job.progress.begin("load", 0.02, f"Loading {job.choice.id} in float32")
    run = load_run(job.choice, job.models_dir, qlora=job.qlora)
    ref = jobs.reference(job, run.model, run.tokenizer) if gguf_convert.readable_back(config) else None
    job.progress.begin("merge", 0.25, "Merging the adapter into the base (float32)")
    model, notes = merge(run, "float32")
    job.notes.extend(notes)
    run.model = None
    merged = job.out / MERGED_DIR
    try:
        save_model(model, run.tokenizer, merged)
        del model
        gc.collect()
        target = job.out / f"{job.stem}-{outtype}.gguf"
        job.progress.begin("convert", 0.4, f"Converting to GGUF {outtype}")
        gguf_convert.convert(
            merged,
            target,
            outtype,
            job.converter_dir,
            lambda line: _on_line(job, outtype, line),
            job.progress.cancelled,
        )
    finally:
        shutil.rmtree(merged, ignore_errors=True)
    job.progress.begin(
        "check", 0.7, "Reading the GGUF's metadata" + (" and loading it back" if ref is not None else "")
    )
    if ref is None:
        check = metadata_check(target, outtype, run.tokenizer, config.get("model_type"))
    else:
        check = check_gguf(target, outtype, ref, run.tokenizer, job.progress)
    card = jobs.write_card(job, [target.name, "README.md"], check, outtype)
    (job.out / "README.md").write_text(card, encoding="utf-8")
    return jobs.result(job, check, outtype)


def check_gguf(
    path: Path, outtype: str, ref: jobs.Reference, tokenizer: Any, progress: Optional[jobs.Progress] = None
) -> CheckResult:
    """Check the GGUF file at ``path``: its metadata against ``tokenizer`` and its answers (loaded
    back in float32) against ``ref`` by ``check.RULES[outtype]``."""
    meta = compare_meta(read_meta(path), tokenizer)
    back = load_causal_lm(path.parent, "float32", gguf_file=path.name)
    if progress is not None:
        progress.say("Answering the check prompts with the GGUF", force=True, fraction=0.85)
    check = jobs.judge(outtype, outtype, ref, back, tokenizer, meta.problems)
    check.chat_template_ok, check.eos_ok = meta.chat_template_ok, meta.eos_ok
    del back
    gc.collect()
    return check


def metadata_check(path: Path, outtype: str, tokenizer: Any, model_type: Optional[str]) -> CheckResult:
    """The check of a GGUF whose architecture transformers cannot load back: its metadata (chat
    template, BOS / EOS) against ``tokenizer``; passed when those agree. The summary says that the
    answers were not compared."""
    meta = compare_meta(read_meta(path), tokenizer)
    return CheckResult(
        passed=not meta.problems,
        summary=f"{outtype}: metadata checked (chat template, BOS/EOS); answers not compared: transformers "
        f"cannot load {model_type} GGUF files back (llama.cpp runs them)",
        required="the chat template and BOS/EOS in the metadata (answers cannot be compared here)",
        chat_template_ok=meta.chat_template_ok,
        eos_ok=meta.eos_ok,
        problems=meta.problems,
    )


def _check_architecture(job: jobs.ExportJob) -> dict:
    """The config.json of the base (adapter) or of the model (full fine-tune); ExportInputError
    when the converter cannot convert it (``gguf_convert.gguf_problem``)."""
    folder = base_dir(job.choice, job.models_dir) if job.choice.adapter else Path(job.choice.path)
    config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    problem = gguf_convert.gguf_problem(config, job.converter_dir)
    if problem:
        raise jobs.ExportInputError(problem)
    return config


def _on_line(job: jobs.ExportJob, outtype: str, line: str) -> None:
    """A converter output line -> a progress message (the ``Writing: N%`` bar moves the fraction)."""
    written = WRITING.search(line)
    fraction = 0.45 + 0.2 * int(written.group(1)) / 100 if written else None
    text = line.split(":", 2)[-1].strip() if line.startswith("INFO:") else line
    job.progress.say(f"GGUF {outtype}: {text}", fraction=fraction)
