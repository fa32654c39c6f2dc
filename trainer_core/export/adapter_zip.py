"""Adapter export: one zip of the PEFT adapter, the tokenizer (with its chat template) and a model card.

Zip layout (flat): ``adapter_model.safetensors``, ``adapter_config.json``, the tokenizer files the
run saved (``tokenizer.json``, ``tokenizer_config.json``, ``chat_template.jinja``, ...) and
``README.md``. When the run's base is a local copy of a Hub model (the studio's offline default,
or a Hub cache snapshot), the zipped ``adapter_config.json`` names the Hub id instead of the local
path, so ``PeftModel.from_pretrained`` works on another machine.

Check: the zip is extracted into a hidden folder of the task, its adapter is loaded onto the same
float32 base beside the run's (``load_adapter``) and must answer the check prompts with exactly the
run's tokens; its tokenizer must render the prompts to the same ids. Full fine-tunes have no
adapter (refused in ``start.start_export``).
"""

from __future__ import annotations

import json
import shutil
import zipfile
from pathlib import Path

from trainer_core.export import check as checks
from trainer_core.export import job as jobs
from trainer_core.export.card import hub_id
from trainer_core.export.schemas import ExportResult
from trainer_core.export.weights import TOKENIZER_FILES, load_run
from trainer_core.serving.choices import ADAPTER_FILE

CONFIG_FILE = "adapter_config.json"
CHECK_DIR = ".check"


def export_adapter(job: jobs.ExportJob) -> ExportResult:
    """Write ``<stem>-adapter.zip`` into ``job.out`` and check it (see the module docstring)."""
    if not job.choice.adapter:
        raise jobs.ExportInputError(
            f"{job.choice.id} is a full fine-tune: it has no adapter to export; export it as merged or GGUF instead"
        )
    job.progress.begin("load", 0.02, f"Loading {job.choice.id} (base in float32 + adapter)")
    run = load_run(job.choice, job.models_dir)
    ref = jobs.reference(job, run.model, run.tokenizer)
    job.progress.begin("package", 0.45, "Zipping the adapter and tokenizer")
    archive = job.out / f"{job.stem}-adapter.zip"
    write_zip(archive, Path(job.choice.path), run.tokenizer_dir, job)
    job.progress.begin("check", 0.6, "Checking the zipped adapter against the run")
    check = _check(job, archive, run, ref)
    card = jobs.write_card(job, [*_names(archive), "README.md"], check, None)
    with zipfile.ZipFile(archive, "a", compression=zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("README.md", card)
    return jobs.result(job, check, None)


def write_zip(archive: Path, weights: Path, tokenizer_dir: Path, job: jobs.ExportJob) -> None:
    """The adapter files from ``weights`` and the tokenizer files from ``tokenizer_dir`` into ``archive``."""
    config = json.loads((weights / CONFIG_FILE).read_text(encoding="utf-8"))
    base = config.get("base_model_name_or_path")
    hub = hub_id(base) if isinstance(base, str) and base else None
    if hub and hub != base:
        config["base_model_name_or_path"] = hub
        job.notes.append(f"adapter_config.json names the base as {hub} (the run used its local copy {base}).")
    if (weights / ADAPTER_FILE).is_symlink():
        raise jobs.ExportInputError(f"{ADAPTER_FILE} in {weights.name} is a link: no link goes into the zip")
    with zipfile.ZipFile(archive, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        zf.write(weights / ADAPTER_FILE, ADAPTER_FILE, compress_type=zipfile.ZIP_STORED)  # safetensors barely compress
        zf.writestr(CONFIG_FILE, json.dumps(config, indent=2))
        for name in TOKENIZER_FILES:
            if (tokenizer_dir / name).is_file() and not (tokenizer_dir / name).is_symlink():
                zf.write(tokenizer_dir / name, name)


def _names(archive: Path) -> list[str]:
    with zipfile.ZipFile(archive) as zf:
        return zf.namelist()


def _check(job: jobs.ExportJob, archive: Path, run, ref: jobs.Reference):
    """Load the zip's adapter and tokenizer beside the run's and compare (exact)."""
    from trainer_core.models.loading import load_tokenizer

    folder = job.out / CHECK_DIR
    try:
        with zipfile.ZipFile(archive) as zf:
            zf.extractall(folder)
        problems = []
        if checks.prompt_ids(load_tokenizer(folder)) != ref.prompts:
            problems.append("the zip's tokenizer renders the check prompts differently from the run's")
        run.model.load_adapter(str(folder), adapter_name="exported", is_trainable=False)
        run.model.set_adapter("exported")
        return jobs.judge("adapter", "adapter", ref, run.model, run.tokenizer, problems)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
