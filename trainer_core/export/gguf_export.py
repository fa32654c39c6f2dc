"""GGUF export: the merged model in float32, converted by llama.cpp's converter (with the chat
template, BOS / EOS in its metadata), then quantised by llama.cpp itself; one task writes several
formats (``ExportRequest.gguf_list``): one conversion to f16, then each quantisation from it.

Which program makes which type: the converter writes f16, bf16 and (without llama.cpp) q8_0;
llama.cpp's quantizer (``llamacpp``) writes q8_0, q6_k, q5_k_m, q4_k_m and q4_0 from the f16 file.
An f16 file made only as the quantizer's source is removed at the end. Without llama.cpp built the
quantised types are refused before any work, naming the command that builds it; f16 / bf16 / q8_0
still work through the converter alone.

First the model's config.json architecture is checked against the converter's registry (missing:
an ``ExportInputError`` before anything is loaded; the start of an export refuses it already).

Stages: load the run (float32) and answer the check prompts (the reference); merge and save the
float32 model into the hidden folder ``.merged`` (removed after conversion); convert; quantize;
check each file: its metadata (``gguf_meta``: chat template, BOS / EOS, file type), then the file
run in llama.cpp (``llamacpp.check``: the template renders a 3-turn chat to the run's token ids,
the end-of-turn token ends generation, answers by ``check.RULES[type]``); where transformers can
read the file back (f16 / q8_0 of the architectures in ``gguf_convert.readable_back``) its answers
are a second opinion, shown beside the check but never what passes or refuses a file: llama.cpp is
what users run. transformers reads the tensors with the source model's config (its GGUF reader
builds the config from the file's keys and ignores some, e.g. ``attention.key_length``: a Qwen3
whose head_dim is not its config default would load as 128-wide heads); where it still cannot load
the file, that is a note, not a failure. Without llama.cpp the transformers read-back (or, for
architectures it cannot read, the metadata alone) is the check, as the summary says. Beside each
file, Ollama's ``<name>.Modelfile`` (``modelfile``). Seconds here: ``bench/export.py``.
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
from trainer_core.export.converter_config import add_converter_keys
from trainer_core.export.gguf_meta import compare_meta, file_type_name, read_meta
from trainer_core.export.llamacpp_check import llama_check
from trainer_core.export.modelfile import trained_system, write_modelfile
from trainer_core.export.schemas import QUANTISED, CheckResult, ExportResult, GGUFFile
from trainer_core.export.weights import base_dir, load_causal_lm, load_run, merge, save_model
from trainer_core.llamacpp import build as llamacpp_build
from trainer_core.llamacpp.client import run_probe
from trainer_core.model_kind import kind_of

MERGED_DIR = ".merged"
WRITING = re.compile(r"Writing:\s+(\d+)%")
TENSOR = re.compile(r"\[\s*(\d+)/\s*(\d+)\]")


def gguf_name(job: jobs.ExportJob) -> str:
    """The GGUF's ``general.name``: the base model's name and the export's stem, e.g.
    ``SmolLM2-135M-Instruct (job_20261205_101500_1a2b3c4d)`` (the base's name keeps llama.cpp's
    name-keyed fixes for its family)."""
    base = str(job.choice.base_model).rstrip("/").split("/")[-1]
    return f"{base} ({job.stem})"


def export_gguf(job: jobs.ExportJob) -> ExportResult:
    """Write ``<stem>-<type>.gguf`` into ``job.out`` for each requested type and check each."""
    types = job.request.gguf_list()
    missing = gguf_convert.missing_message(job.converter_dir)
    if missing:
        raise jobs.ExportInputError(missing)
    llama_dir = job.llama_cpp_dir
    llama_missing = llamacpp_build.missing_message(llama_dir) if llama_dir is not None else "no llama.cpp folder set"
    quantised = [t for t in types if t in QUANTISED]
    if quantised and llama_missing:
        raise jobs.ExportInputError(f"GGUF {', '.join(quantised)}: {llama_missing}")
    config = _check_architecture(job)
    job.progress.begin("load", 0.02, f"Loading {job.choice.id} in float32")
    run = load_run(job.choice, job.models_dir, qlora=job.qlora)
    readable = gguf_convert.readable_back(config)
    kind = kind_of(config)
    note = kind.gguf_note(config)  # set where the answers cannot be compared here
    if note is not None:
        job.notes.append(note)
    ref = jobs.reference(job, run.model, run.tokenizer) if (readable or not llama_missing) and note is None else None
    job.progress.begin("merge", 0.25, "Merging the adapter into the base (float32)")
    model, notes = merge(run, "float32")
    job.notes.extend(notes)
    run.model = None
    merged = job.out / MERGED_DIR
    targets = {t: job.out / f"{job.stem}-{t}.gguf" for t in types}
    by_llama = [t for t in types if t not in ("f16", "bf16")] if not llama_missing else []
    source = targets.get("f16", job.out / MERGED_DIR / f"{job.stem}-f16.gguf")
    projector = job.out / f"{job.stem}-mmproj-f16.gguf" if kind.gguf_projector else None
    try:
        save_model(model, run.tokenizer, merged, run.processor)
        add_converter_keys(merged)  # the names llama.cpp's converter still reads (export.converter_config)
        del model
        gc.collect()
        converted = [t for t in types if t not in by_llama] + (["f16"] if by_llama and "f16" not in types else [])
        for outtype in converted:
            target = targets.get(outtype, source)
            job.progress.begin("convert", 0.4, f"Converting to GGUF {outtype}")
            gguf_convert.convert(
                merged,
                target,
                outtype,
                job.converter_dir,
                lambda line, o=outtype: _on_line(job, o, line),
                job.progress.cancelled,
                model_name=gguf_name(job),
            )
        if projector is not None:  # the images' half: llama.cpp loads it with --mmproj beside the language model
            job.progress.begin(
                "convert", 0.55, "Converting the image or audio tower and its projector to GGUF f16 (mmproj)"
            )
            gguf_convert.convert(
                merged,
                projector,
                "f16",
                job.converter_dir,
                lambda line: _on_line(job, "mmproj f16", line),
                job.progress.cancelled,
                model_name=gguf_name(job),
                mmproj=True,
            )
        for index, gguf_type in enumerate(by_llama):
            job.progress.begin(
                "quantize", 0.6 + 0.1 * index / len(by_llama), f"Quantising to {gguf_type} with llama.cpp"
            )
            run_probe(
                {"op": "quantize", "source": str(source), "target": str(targets[gguf_type]), "type": gguf_type},
                llama_dir,
                lambda line, g=gguf_type: _on_quantize_line(job, g, line),
                job.progress.cancelled,
            )
    finally:
        shutil.rmtree(merged, ignore_errors=True)
    files = []
    for index, gguf_type in enumerate(types):
        job.progress.begin("check", 0.7 + 0.25 * index / len(types), f"Checking {targets[gguf_type].name}")
        files.append(check_file(job, targets[gguf_type], gguf_type, ref, run.tokenizer, config, llama_missing))
    if projector is not None:
        files.append(projector_file(projector))
    system = trained_system(Path(job.choice.path)) if job.choice.path else None
    modelfiles = [write_modelfile(targets[t], run.tokenizer, system, projector).name for t in types]  # Ollama
    names = [f.name for f in files]
    card = jobs.write_card(job, [*names, *modelfiles, "README.md"], files[0].check, types[0], files)
    (job.out / "README.md").write_text(card, encoding="utf-8")
    return jobs.result(job, files[0].check, types[0], files)


def projector_file(path: Path) -> GGUFFile:
    """The ``mmproj`` file of a vision-language export: its header read back (a GGUF of the vision
    tower and projector, ``clip.*`` keys); what it does is llama.cpp's to run (``--mmproj``)."""
    meta = read_meta(path)
    return GGUFFile(
        name=path.name,
        type="mmproj-f16",
        file_type=file_type_name(meta.file_type),
        size_bytes=path.stat().st_size,
        check=CheckResult(
            passed=True,
            summary="mmproj f16: the image or audio tower and its projector, read back as a GGUF file; llama.cpp loads it "
            "with --mmproj beside the language model's file",
            required="a readable GGUF file",
            checked_by="metadata",
        ),
    )


def check_file(
    job: jobs.ExportJob,
    path: Path,
    gguf_type: str,
    ref: Optional[jobs.Reference],
    tokenizer: Any,
    config: dict,
    llama_missing: Optional[str],
) -> GGUFFile:
    """Check one GGUF file: metadata, then llama.cpp where built (transformers' read-back as a
    second opinion for f16 / q8_0), else transformers or the metadata alone."""
    meta = read_meta(path)
    entry = GGUFFile(
        name=path.name, type=gguf_type, file_type=file_type_name(meta.file_type), size_bytes=path.stat().st_size
    )
    back = ref is not None and gguf_convert.readable_back(config) and gguf_type in ("f16", "q8_0")
    if not llama_missing and ref is not None:
        entry.check = llama_check(
            path,
            gguf_type,
            ref,
            tokenizer,
            job.llama_cpp_dir,
            lambda line: None,  # llama.cpp's load log: its error line is quoted by the client when it fails
            job.progress.cancelled,
        )
        entry.check.problems = compare_meta(meta, tokenizer).problems + entry.check.problems
        entry.check.passed = not entry.check.problems
        if back:
            entry.second_opinion = _read_back(job, path, gguf_type, ref, tokenizer, config)
    elif back and (read := _read_back(job, path, gguf_type, ref, tokenizer, config)) is not None:
        entry.check = read
    else:
        entry.check = metadata_check(path, gguf_type, tokenizer, config.get("model_type"))
        if llama_missing:
            entry.check.summary += f" (llama.cpp is not built: {llama_missing.split(': ')[-1]})"
    return entry


def _read_back(
    job: jobs.ExportJob, path: Path, gguf_type: str, ref: jobs.Reference, tokenizer: Any, config: dict
) -> Optional[CheckResult]:
    """transformers' read-back of ``path`` (``check_gguf``), or None with a note in ``job.notes``
    when its GGUF reader cannot load the file: a second reader's limits never refuse a file."""
    from trainer_core.models.loading import ModelLoadError

    try:
        return check_gguf(path, gguf_type, ref, tokenizer, job.progress, config)
    except ModelLoadError as exc:
        reason = str(exc).split(": ", 1)[-1].splitlines()[0][:200]
        job.notes.append(
            f"{path.name}: transformers' GGUF reader could not load the file back ({reason}); not compared by it"
        )
        return None


def check_gguf(
    path: Path,
    outtype: str,
    ref: jobs.Reference,
    tokenizer: Any,
    progress: Optional[jobs.Progress] = None,
    config: Optional[dict] = None,
) -> CheckResult:
    """Check the GGUF file at ``path``: its metadata against ``tokenizer`` and its answers (loaded
    back in float32, its tensors shaped by ``config``, the source's config.json, where given)
    against ``ref`` by ``check.RULES[outtype]``. Raises ModelLoadError when transformers cannot
    load it."""
    meta = compare_meta(read_meta(path), tokenizer)
    shaped = {"config": _config_object(config)} if config else {}
    back = load_causal_lm(path.parent, "float32", gguf_file=path.name, **shaped)
    if progress is not None:
        progress.say("Answering the check prompts with the GGUF", force=True, fraction=0.85)
    check = jobs.judge(outtype, outtype, ref, back, tokenizer, meta.problems)
    check.chat_template_ok, check.eos_ok = meta.chat_template_ok, meta.eos_ok
    check.checked_by = "transformers"
    del back
    gc.collect()
    return check


def _config_object(config: dict) -> Any:
    """A transformers config from a config.json's contents (its ``model_type``'s class)."""
    from transformers import AutoConfig

    values = {k: v for k, v in config.items() if k != "model_type"}
    return AutoConfig.for_model(config["model_type"], **values)


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
        checked_by="metadata",
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
    """A converter output line -> progress: its ``Writing: N%`` bar as a percentage (its other lines
    go to the log only: they are the converter's, not words for the user)."""
    written = WRITING.search(line)
    if written:
        percent = int(written.group(1))
        job.progress.say(f"Converting to GGUF {outtype}: {percent}% written", fraction=0.45 + 0.2 * percent / 100)


def _on_quantize_line(job: jobs.ExportJob, gguf_type: str, line: str) -> None:
    """A llama.cpp quantizer log line (``[ 11/ 272] blk.0.ffn_up.weight ...``) -> ``tensor 11 of 272``."""
    tensor = TENSOR.search(line)
    if tensor:
        job.progress.say(f"Quantising to {gguf_type} with llama.cpp: tensor {tensor.group(1)} of {tensor.group(2)}")
