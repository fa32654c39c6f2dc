"""Export of an embedding run (``EmbeddingKind.exporter``), as sentence-transformers folders.

- **adapter**: one zip of the run's sentence-transformers folder with its adapter: the module files
  (``modules.json``, ``config_sentence_transformers.json``, ``sentence_bert_config.json``, each
  module's folder such as ``1_Pooling``), the encoder's ``config.json``, the tokenizer, PEFT's
  ``adapter_config.json`` + ``adapter_model.safetensors`` and the card. Checked by loading the
  unzipped folder on the base (``loading.load_embedder``) beside the run.
- **merged**: the adapter merged into its base (``merge_and_unload``) and saved whole in the chosen
  dtype, a folder ``SentenceTransformer(path)`` loads by itself. Checked by that library call.

Each check embeds ``CHECK_SENTENCES`` with the exported model and with the run as trained (float32)
and compares the vectors by cosine similarity (``compare_vectors``): at least ``ADAPTER_COSINE``
for the adapter (the same weights), ``MERGED_COSINE`` for the merged folder (rounded to its dtype).
GGUF: ``kinds.embedding.gguf``.
"""

from __future__ import annotations

import gc
import json
import shutil
import zipfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Optional

from trainer_core.export import job as jobs
from trainer_core.export.card import hub_id
from trainer_core.export.schemas import CheckResult, ExportResult
from trainer_core.export.weights import TOKENIZER_FILES, base_dir, torch_dtype
from trainer_core.kinds.embedding.loading import ADAPTER_CONFIG, MODULES, EmbedderLoadError, load_embedder

CHECK_SENTENCES = (
    "How do I reset my password?",
    "The cat sat on the mat and looked out of the window.",
    "Einstein was born in Ulm in 1879.",
    "Give three tips for staying healthy.",
)
ADAPTER_COSINE = 0.9999  # the zipped adapter is the run's own weights
MERGED_COSINE = 0.999  # merged and rounded to float16 / bfloat16
ADAPTER_FILE = "adapter_model.safetensors"
ROOT_FILES = (
    MODULES,
    "config_sentence_transformers.json",
    "sentence_bert_config.json",
    "config.json",
    ADAPTER_CONFIG,
    ADAPTER_FILE,
    "vocab.txt",
    "sentencepiece.bpe.model",
    *TOKENIZER_FILES,
)
CHECK_DIR = ".check"


def load_run_embedder(job: jobs.ExportJob) -> Any:
    """The run as trained (``SentenceTransformer``, float32, on the CPU): its folder, on its base
    (``export.weights.base_dir``) where it holds an adapter. Raises ExportInputError."""
    folder = Path(job.choice.path)
    try:
        base = base_dir(job.choice, job.models_dir) if job.choice.adapter else None
        return load_embedder(folder, base=base)
    except (EmbedderLoadError, OSError, ValueError) as exc:
        raise jobs.ExportInputError(f"{job.choice.id}: could not load the embedding model ({exc})") from exc


def reference(job: jobs.ExportJob, model: Any) -> Any:
    """The run's vectors of ``CHECK_SENTENCES``, (N, D) float32 (stage ``reference``)."""
    job.progress.begin("reference", 0.15, f"Embedding {len(CHECK_SENTENCES)} check sentences with the run as trained")
    return embed(model, CHECK_SENTENCES)


def embed(model: Any, texts: Sequence[str]) -> Any:
    """(N, D) float32 numpy vectors of ``texts`` by the ``SentenceTransformer`` ``model``."""
    import numpy as np

    return np.asarray(model.encode(list(texts), convert_to_numpy=True), dtype=np.float32)


def cosines(want: Any, got: Any) -> list[float]:
    """Row-wise cosine similarity of two (N, D) arrays (0.0 where a row is all zeros or D differs)."""
    import numpy as np

    want, got = np.asarray(want, dtype=np.float64), np.asarray(got, dtype=np.float64)
    if want.shape != got.shape:
        return [0.0] * len(want)
    norms = np.linalg.norm(want, axis=1) * np.linalg.norm(got, axis=1)
    return [float(v) for v in np.where(norms > 0, (want * got).sum(axis=1) / np.maximum(norms, 1e-30), 0.0)]


def compare_vectors(
    label: str, want: Any, got: Any, required: float, checked_by: str, problems: Sequence[str] = ()
) -> CheckResult:
    """The check of an exported embedder: ``got`` (N, D) against the run's ``want``; passed when
    every sentence's cosine is at least ``required`` and there are no ``problems``."""
    values = cosines(want, got)
    low = min(values) if values else 0.0
    close = sum(v >= required for v in values)
    found = list(problems)
    if close < len(values):
        worst = values.index(low)
        found.append(f"sentence {worst + 1} ({CHECK_SENTENCES[worst]!r}): cosine {low:.5f} < {required}")
    return CheckResult(
        passed=not found,
        summary=f"{label}: {close}/{len(values)} sentences, lowest cosine {low:.5f}",
        checked_by=checked_by,
        prompts_equal=close,
        prompts_total=len(values),
        required=f"each check sentence's vector at cosine >= {required} to the run's (float32)",
        problems=found,
        cosine_min=round(low, 6),
        samples=[{"prompt": s, "cosine": f"{v:.6f}"} for s, v in zip(CHECK_SENTENCES, values)],
    )


def model_files(folder: Path) -> list[str]:
    """The sentence-transformers model's files in a run ``folder`` (relative names): ``ROOT_FILES``
    present there and every file of each module's own folder (``modules.json``'s paths); never a
    link, a checkpoint or the run's logs. Raises ExportInputError when ``modules.json`` is unreadable."""
    folder = Path(folder)
    try:
        modules = json.loads((folder / MODULES).read_text(encoding="utf-8"))
        paths = [str(m.get("path") or "") for m in modules]
    except (OSError, ValueError, AttributeError) as exc:
        raise jobs.ExportInputError(f"{folder / MODULES}: not a sentence-transformers module list ({exc})") from exc
    names = [name for name in ROOT_FILES if (folder / name).is_file() and not (folder / name).is_symlink()]
    for sub in dict.fromkeys(p for p in paths if p):
        top = (folder / sub).resolve()
        if not top.is_dir() or not top.is_relative_to(folder.resolve()) or (folder / sub).is_symlink():
            continue
        names += [str(p.relative_to(folder)) for p in sorted(top.rglob("*")) if p.is_file() and not p.is_symlink()]
    return names


def export_adapter(job: jobs.ExportJob) -> ExportResult:
    """Write ``<stem>-adapter.zip`` into ``job.out`` and check it (see the module docstring)."""
    from trainer_core.kinds.embedding.card import write_card

    if not job.choice.adapter:
        raise jobs.ExportInputError(
            f"{job.choice.id} is a full fine-tune: it has no adapter to export; export it as merged or GGUF instead"
        )
    job.progress.begin("load", 0.02, f"Loading {job.choice.id} (base + adapter)")
    run = load_run_embedder(job)
    want = reference(job, run)
    job.progress.begin("package", 0.45, "Zipping the sentence-transformers folder with its adapter")
    archive = job.out / f"{job.stem}-adapter.zip"
    write_zip(archive, Path(job.choice.path), job)
    job.progress.begin("check", 0.6, "Loading the zipped folder on the base and embedding the check sentences")
    folder = job.out / CHECK_DIR
    try:
        with zipfile.ZipFile(archive) as zf:
            zf.extractall(folder)
        back = load_embedder(folder, base=base_dir(job.choice, job.models_dir))
        check = compare_vectors("adapter", want, embed(back, CHECK_SENTENCES), ADAPTER_COSINE, "sentence-transformers")
        del back
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    with zipfile.ZipFile(archive) as zf:
        names = [*zf.namelist(), "README.md"]
    card = write_card(job, names, check, None)
    with zipfile.ZipFile(archive, "a", compression=zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("README.md", card)
    return jobs.result(job, check, None)


def write_zip(archive: Path, folder: Path, job: jobs.ExportJob) -> None:
    """``model_files(folder)`` into ``archive``; ``adapter_config.json``'s base named by its Hub id
    where the run used a local copy of a Hub model (a note says so)."""
    config = json.loads((folder / ADAPTER_CONFIG).read_text(encoding="utf-8"))
    base = config.get("base_model_name_or_path")
    hub = hub_id(base) if isinstance(base, str) and base else None
    if hub and hub != base:
        config["base_model_name_or_path"] = hub
        job.notes.append(f"adapter_config.json names the base as {hub} (the run used its local copy {base}).")
    with zipfile.ZipFile(archive, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        for name in model_files(folder):
            if name == ADAPTER_CONFIG:
                zf.writestr(name, json.dumps(config, indent=2))
            else:
                stored = zipfile.ZIP_STORED if name.endswith(".safetensors") else zipfile.ZIP_DEFLATED
                zf.write(folder / name, name, compress_type=stored)


def merged_embedder(run: Any) -> tuple[Any, list[str]]:
    """``run`` (used up) as one whole model: its adapter merged (``merge_and_unload``), or a full
    fine-tune as it is; with the card's notes."""
    from peft import PeftModel

    body = run[0]
    if isinstance(body.model, PeftModel):
        body.model = body.model.merge_and_unload()
        return run, []
    return run, ["Full fine-tune: the model's own weights, re-saved."]


def export_merged(job: jobs.ExportJob) -> ExportResult:
    """Write the merged sentence-transformers folder into ``job.out`` and check it with
    ``SentenceTransformer(path)`` itself (see the module docstring)."""
    from sentence_transformers import SentenceTransformer

    from trainer_core.kinds.embedding.card import write_card

    dtype = job.request.dtype
    job.progress.begin("load", 0.02, f"Loading {job.choice.id} in float32")
    run = load_run_embedder(job)
    want = reference(job, run)
    job.progress.begin("merge", 0.3, "Merging the adapter into the base" if job.choice.adapter else "Preparing")
    model, notes = merged_embedder(run)
    job.notes.extend(notes)
    job.progress.begin("save", 0.45, f"Saving the sentence-transformers folder in {dtype}")
    save_whole(model, job.out, dtype)
    del model, run
    gc.collect()
    job.progress.begin("check", 0.65, "Loading the folder with SentenceTransformer(path) and embedding the check")
    back = SentenceTransformer(str(job.out), device="cpu", model_kwargs={"dtype": torch_dtype("float32")})
    check = compare_vectors(dtype, want, embed(back, CHECK_SENTENCES), MERGED_COSINE, "sentence-transformers")
    del back
    gc.collect()
    files = [f.name for f in jobs.listing(job.out) if f.name != "README.md"] + ["README.md"]
    (job.out / "README.md").write_text(write_card(job, files, check, dtype), encoding="utf-8")
    return jobs.result(job, check, dtype)


def save_whole(model: Any, folder: Path, dtype: Optional[str]) -> None:
    """Save the whole ``SentenceTransformer`` into ``folder`` (created), its weights cast to
    ``dtype`` first where given (``schemas.MergeDtype``)."""
    folder.mkdir(parents=True, exist_ok=True)
    if dtype is not None:
        model.to(torch_dtype(dtype))
    model.save_pretrained(str(folder))
