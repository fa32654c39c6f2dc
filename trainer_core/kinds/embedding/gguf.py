"""GGUF export of an embedding run, checked in llama.cpp the way its users embed text.

llama.cpp's converter writes BERT-style encoders (its ``bert`` converters) and decoder LLMs; it
reads the pooling from the sentence-transformers folder's Pooling module (mean, cls, lasttoken):
its own converters do for encoders and some decoders (Qwen2/3, Gemma 3), and the studio's boot of
the converter (``export.gguf_convert``) does for the others (e.g. Llama / SmolLM2, whose file would
otherwise have no ``<arch>.pooling_type`` and give one vector a token). The check asks llama.cpp
which pooling it read from the file.

Refused before anything is loaded (``gguf_problem``): a converter that does not know the
architecture (``export.gguf_convert.gguf_problem``), a Pooling mode llama.cpp lacks (max,
weighted mean, ...), a Dense module after pooling (llama.cpp would leave it out), a transformer
module kept in a subfolder (the converter reads the folder's root). llama.cpp must be built: the
check is its own vectors.

Stages: load the run (float32), embed ``export.CHECK_SENTENCES`` (the reference), merge and save the
float32 folder into ``.merged``, convert (f16 / bf16), quantize the other
types (q8_0 ... q4_0) from f16 with llama.cpp, then per file: llama.cpp's vectors (``llamacpp.probe``'s ``embed``)
against the reference, cosine >= ``GGUF_COSINE`` (f16 / bf16: required 0.99; quantised types: a
floor that only a broken file misses, the figure stated in the summary and the card).
"""

from __future__ import annotations

import gc
import json
import os
import shutil
from pathlib import Path
from typing import Any, Optional

from trainer_core.export import gguf_convert
from trainer_core.export import job as jobs
from trainer_core.export.converter_config import add_converter_keys
from trainer_core.export.gguf_export import gguf_name
from trainer_core.export.gguf_meta import file_type_name
from trainer_core.export.schemas import ExportResult, GGUFFile
from trainer_core.kinds.embedding import export as exports
from trainer_core.kinds.embedding.loading import MODULES, EmbedderLoadError, checked_modules
from trainer_core.llamacpp import build as llamacpp_build
from trainer_core.llamacpp.client import run_probe

MERGED_DIR = ".merged"
POOLING_TYPES = {"mean": 1, "cls": 2, "lasttoken": 3}  # llama.cpp's enum llama_pooling_type
GGUF_COSINE = {"f16": 0.99, "bf16": 0.99, "q8_0": 0.98}
QUANTISED_COSINE = 0.9  # q6_k ... q4_0 on a tiny random model; the figure itself is what the card states


def pooling_mode(folder: Path) -> Optional[str]:
    """The Pooling module's mode in the sentence-transformers ``folder`` ("mean", "cls",
    "lasttoken", "max", ...), read from its ``config.json``; None without a Pooling module."""
    modules = json.loads((Path(folder) / MODULES).read_text(encoding="utf-8"))
    for module in modules:
        if str(module.get("type", "")).endswith("Pooling"):
            config = json.loads((Path(folder) / module["path"] / "config.json").read_text(encoding="utf-8"))
            if config.get("pooling_mode"):
                return str(config["pooling_mode"])
            old = [k for k, v in config.items() if k.startswith("pooling_mode_") and v is True]  # older layout
            return {"mean_tokens": "mean", "cls_token": "cls"}.get(old[0][13:], old[0][13:]) if old else None
    return None


def architecture_problem(config: dict, converter: Path) -> Optional[str]:
    """Why llama.cpp's converter in ``converter`` cannot write the embedding model whose config.json
    is ``config`` (its architecture unknown to it), or None (``EmbeddingKind.gguf_problem``)."""
    problem = gguf_convert.architecture_problem(config.get("architectures") or [], converter)
    if problem:
        return (
            f"{problem}. llama.cpp embeds BERT-style encoders (BertModel, XLMRobertaModel, ModernBertModel, ...) "
            "and decoder LLMs; the merged export is a sentence-transformers folder"
        )
    return None


def gguf_problem(folder: Path, config: dict, converter: Path) -> Optional[str]:
    """Why the embedding model whose module files are in ``folder`` (config.json ``config``) cannot
    be a llama.cpp GGUF, or None (see the module docstring)."""
    problem = architecture_problem(config, converter)
    if problem:
        return problem
    try:
        modules = checked_modules(folder)  # each module's files inside the run folder
        mode = pooling_mode(folder)
    except EmbedderLoadError as exc:
        return str(exc)
    except (OSError, ValueError, KeyError, TypeError) as exc:
        return f"{Path(folder) / MODULES}: its modules cannot be read ({exc})"
    if any(str(m.get("type", "")).endswith("Dense") for m in modules):
        return (
            "GGUF export: the model has a Dense module after pooling, which llama.cpp leaves out; export merged instead"
        )
    body = next((m for m in modules if str(m.get("type", "")).endswith("Transformer")), None)
    if body is not None and body.get("path"):
        return "GGUF export: the transformer module is in a subfolder; llama.cpp's converter reads the folder's root"
    if mode not in POOLING_TYPES:
        return (
            f"GGUF export: llama.cpp pools by mean, cls or last token, not {mode!r} (the model's Pooling module); "
            "export merged instead"
        )
    return None


def export_gguf(job: jobs.ExportJob) -> ExportResult:
    """Write ``<stem>-<type>.gguf`` into ``job.out`` for each requested type and check each in llama.cpp."""
    from trainer_core.kinds.embedding.card import write_card

    types = job.request.gguf_list()
    llama_missing = llamacpp_build.missing_message(job.llama_cpp_dir) if job.llama_cpp_dir else "not set up"
    if llama_missing:
        raise jobs.ExportInputError(f"GGUF of an embedding model is checked in llama.cpp: {llama_missing}")
    base = exports.base_dir(job.choice, job.models_dir) if job.choice.adapter else Path(job.choice.path)
    problem = gguf_problem(Path(job.choice.path), _config(base), job.converter_dir)
    if problem:
        raise jobs.ExportInputError(problem)
    mode = pooling_mode(Path(job.choice.path))
    job.progress.begin("load", 0.02, f"Loading {job.choice.id} in float32")
    run = exports.load_run_embedder(job)
    want = exports.reference(job, run)
    job.progress.begin("merge", 0.25, "Merging the adapter into the base (float32)")
    model, notes = exports.merged_embedder(run)
    job.notes.extend(notes)
    merged = job.out / MERGED_DIR
    targets = {t: job.out / f"{job.stem}-{t}.gguf" for t in types}
    by_llama = [t for t in types if t not in ("f16", "bf16")]  # q8_0 too: llama.cpp is here (checked above)
    source = targets.get("f16", merged / f"{job.stem}-f16.gguf")
    try:
        exports.save_whole(model, merged, None)
        add_converter_keys(merged)
        del model, run
        gc.collect()
        for outtype in [t for t in types if t not in by_llama] + (["f16"] if by_llama and "f16" not in types else []):
            target = targets.get(outtype, source)
            job.progress.begin("convert", 0.4, f"Converting to GGUF {outtype}")
            gguf_convert.convert(
                merged, target, outtype, job.converter_dir, lambda line: None, job.progress.cancelled, gguf_name(job)
            )
        for gguf_type in by_llama:
            job.progress.begin("quantize", 0.6, f"Quantising to {gguf_type} with llama.cpp")
            run_probe(
                {"op": "quantize", "source": str(source), "target": str(targets[gguf_type]), "type": gguf_type},
                job.llama_cpp_dir,
                lambda line: None,
                job.progress.cancelled,
            )
    finally:
        shutil.rmtree(merged, ignore_errors=True)
    files = []
    for index, gguf_type in enumerate(types):
        job.progress.begin("check", 0.7 + 0.25 * index / len(types), f"Embedding the check in llama.cpp: {gguf_type}")
        files.append(check_file(job, targets[gguf_type], gguf_type, want, POOLING_TYPES[mode]))
    names = [f.name for f in files]
    (job.out / "README.md").write_text(
        write_card(job, [*names, "README.md"], files[0].check, types[0], files), encoding="utf-8"
    )
    return jobs.result(job, files[0].check, types[0], files)


def check_file(job: jobs.ExportJob, path: Path, gguf_type: str, want: Any, pooling: int) -> GGUFFile:
    """One GGUF file's check: llama.cpp's vectors of the check sentences against ``want`` (N, D),
    and the pooling llama.cpp read from the file against the model's ``pooling`` type."""
    answer = run_probe(
        {"op": "embed", "gguf": str(path), "texts": list(exports.CHECK_SENTENCES), "threads": _threads()},
        job.llama_cpp_dir,
        lambda line: None,
        job.progress.cancelled,
    )
    problems = []
    if answer.get("pooling_type") != pooling:
        problems.append(f"llama.cpp pools this file by type {answer.get('pooling_type')}, the model by {pooling}")
    required = GGUF_COSINE.get(gguf_type, QUANTISED_COSINE)
    check = exports.compare_vectors(
        f"{gguf_type} in llama.cpp", want, answer["vectors"], required, "llama.cpp", problems
    )
    return GGUFFile(
        name=path.name,
        type=gguf_type,
        file_type=file_type_name(answer.get("file_type")),
        size_bytes=path.stat().st_size,
        check=check,
    )


def _config(folder: Path) -> dict:
    try:
        return json.loads((Path(folder) / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise jobs.ExportInputError(f"{Path(folder) / 'config.json'}: cannot be read ({exc})") from exc


def _threads() -> int:
    return max(1, min(4, os.cpu_count() or 1))
