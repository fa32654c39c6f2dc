"""The README.md model card of an embedding run's export (adapter zip, merged folder, GGUF), as the
Hub shows sentence-transformers models: the base, the loss, the data, the metrics the run logged
(its last value of each ``eval_*`` figure in ``metrics.jsonl`` or the run history, e.g.
``eval_ndcg_at_10``), the export's check and how to load it.

The run's facts come from ``export.card.gather_facts`` (the request, the losses, the rows read).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Optional

from trainer_core.export import job as jobs
from trainer_core.export.card import RunFacts, gather_facts, run_folder
from trainer_core.export.schemas import CheckResult, GGUFFile
from trainer_core.llamacpp.build import SETUP_HINT

DEFAULT_LOSS = "chosen from the data's columns (MultipleNegativesRankingLoss for anchor/positive pairs)"
# Where scripts/setup.sh builds llama-cpp-python (settings.llama_cpp_dir's default, as a user types it)
LLAMA_CPP_PYTHONPATH = "~/.cache/finetune_studio/tools/llama-cpp-python"
EMBEDDING_SETTINGS = ("embedding_loss", "matryoshka_dims", "query_prompt", "mini_batch_size", "embedding_columns")


def write_card(
    job: jobs.ExportJob,
    files: list[str],
    check: Optional[CheckResult],
    dtype: Optional[str],
    gguf: Sequence[GGUFFile] = (),
) -> str:
    """The card's text for this export (stage ``card``)."""
    job.progress.begin("card", 0.97, "Writing the model card")
    facts = gather_facts(job.choice, job.run_info)
    metrics = run_metrics(job.choice, job.run_info)
    return render(facts, metrics, job.request.format, files, check, job.notes, dtype, gguf)


def run_metrics(choice: Any, run: Optional[dict[str, Any]] = None) -> dict[str, float]:
    """The last logged value of each evaluation figure (``eval_*`` keys, numbers) up to the
    exported step, from the run history's ``run["metrics"]`` or the run folder's ``metrics.jsonl``."""
    rows = (run or {}).get("metrics")
    if rows is None:
        try:
            lines = (run_folder(choice) / "metrics.jsonl").read_text(encoding="utf-8").splitlines()
        except OSError:
            lines = []
        rows = []
        for line in lines:
            try:
                rows.append(json.loads(line))
            except ValueError:
                continue
    found: dict[str, float] = {}
    for row in rows:
        if not isinstance(row, dict) or (choice.step is not None and (row.get("step") or 0) > choice.step):
            continue
        for key, value in row.items():
            if key.startswith("eval_") and isinstance(value, (int, float)) and not isinstance(value, bool):
                found[key] = float(value)
    return found


def render(
    facts: RunFacts,
    metrics: dict[str, float],
    fmt: str,
    files: list[str],
    check: Optional[CheckResult],
    notes: Sequence[str],
    dtype: Optional[str] = None,
    gguf: Sequence[GGUFFile] = (),
) -> str:
    """The card's Markdown for an export of format ``fmt`` holding ``files``."""
    req = facts.request
    library = "sentence-transformers" if not fmt.startswith("gguf") else None
    meta = ["---"] + ([f"base_model: {facts.hub_base}"] if facts.hub_base else [])
    meta += [f"library_name: {library}"] if library else []
    meta += ["pipeline_tag: sentence-similarity", "tags:", "- sentence-transformers", "- feature-extraction"]
    meta += ["- finetune-studio", f"- {facts.training_type}", *(["- gguf"] if fmt.startswith("gguf") else []), "---"]
    what = {"adapter": "LoRA adapter (sentence-transformers folder)", "merged": f"merged embedding model ({dtype})"}
    step = f" for {facts.step} steps" if facts.step is not None else ""
    title = what.get(fmt, f"GGUF embedding model ({fmt.removeprefix('gguf-')})")
    lines = [
        "",
        f"# {facts.name}: {title}",
        "",
        f"A text-embedding model fine-tuned from `{facts.base_model}` with Finetune Studio "
        f"({facts.training_type}{step}) through sentence-transformers.",
        "",
        f"- loss: `{req.get('embedding_loss') or DEFAULT_LOSS}`",
    ]
    lines += [f"- {k}: `{req[k]}`" for k in EMBEDDING_SETTINGS[1:] if req.get(k)]
    lines += ["", "## Files", "", *(f"- `{name}`" for name in files)]
    lines += [
        f"- `{g.name}` ({g.type}, {g.size_bytes / 1e6:.1f} MB): {g.check.summary if g.check else 'not checked'}"
        for g in gguf
    ]
    lines.append("")
    lines += _data(facts) + _results(facts, metrics) + _check(check) + _usage(facts, fmt, files)
    if notes:
        lines += ["## Notes", "", *(f"- {n}" for n in notes), ""]
    return "\n".join(meta + lines)


def _data(facts: RunFacts) -> list[str]:
    req = facts.request
    lines = ["## Training data", ""]
    if req.get("hf_dataset"):
        lines.append(f"- Hub dataset `{req['hf_dataset']}` (split {req.get('train_split') or 'train'})")
    for path in req.get("local_datasets") or []:
        rows = facts.dataset_rows.get(Path(path).name)
        lines.append(f"- `{Path(path).name}`" + (f": {rows} rows used" if rows is not None else ""))
    if facts.training_rows is not None:
        lines.append(f"- {facts.training_rows} training rows in all")
    return lines + ([""] if len(lines) > 2 else ["- not recorded", ""])


def _results(facts: RunFacts, metrics: dict[str, float]) -> list[str]:
    lines = [f"- final training loss: {facts.train_loss:.4f}"] if facts.train_loss is not None else []
    lines += [f"- {key}: {value:.4f}" for key, value in sorted(metrics.items())]
    return ["## Results (held-out evaluation at the exported step)", "", *lines, ""] if lines else []


def _check(check: Optional[CheckResult]) -> list[str]:
    if check is None:
        return []
    lines = ["## Export check", "", f"{'Passed' if check.passed else 'FAILED'} ({check.checked_by}): {check.summary}."]
    lines += ["", f"Required: {check.required}.", "", *(f"- problem: {p}" for p in check.problems)]
    return lines + [""]


def _usage(facts: RunFacts, fmt: str, files: list[str]) -> list[str]:
    base = facts.hub_base or facts.base_model
    prompt = facts.request.get("query_prompt")
    query = f'model.encode(["what is a cat?"], prompt="{prompt}")' if prompt else 'model.encode(["what is a cat?"])'
    if fmt == "adapter":
        code = [
            "# PEFT 0.22 or newer: sentence-transformers attaches the adapter itself",
            "from sentence_transformers import SentenceTransformer",
            'model = SentenceTransformer("PATH_TO_THIS_FOLDER")  # the unzipped files',
            "",
            "# PEFT 0.21: SentenceTransformer(path) would load random weights and no adapter, silently;",
            f"# Finetune Studio's loader attaches it (BASE_FOLDER: a local copy of {base})",
            "from trainer_core.kinds.embedding.loading import load_embedder",
            'model = load_embedder("PATH_TO_THIS_FOLDER", base="BASE_FOLDER")',
            "",
            f"vectors = {query}",
        ]
        return ["## How to load", "", "```python", *code, "```", ""]
    if fmt == "merged":
        code = [
            "from sentence_transformers import SentenceTransformer",
            'model = SentenceTransformer("PATH_TO_THIS_FOLDER")',
            f"vectors = {query}",
        ]
        return ["## How to load", "", "```python", *code, "```", ""]
    gguf = next((f for f in files if f.endswith(".gguf")), "MODEL.gguf")
    return [
        "## How to use",
        "",
        "The pooling type is in the file's metadata; llama.cpp returns one vector a text. Normalise it",
        "(below) to get the unit-length vectors the run made, whose cosine is their dot product.",
        "",
        f"Python: llama-cpp-python (`pip install llama-cpp-python`; or, after Finetune Studio's "
        f"`{SETUP_HINT}`, its own build: `PYTHONPATH={LLAMA_CPP_PYTHONPATH} python3`).",
        "",
        "```python",
        "from llama_cpp import Llama",
        f'model = Llama("{gguf}", embedding=True, verbose=False)',
        'vector = model.embed("what is a cat?", normalize=True)  # unit length, as the run\'s',
        "```",
        "",
        "llama.cpp's own programs (not built by Finetune Studio's setup: build llama.cpp with",
        "`cmake -B build && cmake --build build --target llama-embedding llama-server`, in `build/bin/`):",
        "",
        "```sh",
        f"llama-embedding -m {gguf} --embd-normalize 2 -p 'what is a cat?'   # 2: unit length",
        f"llama-server -m {gguf} --embedding   # OpenAI-style /v1/embeddings",
        "```",
        "",
    ]
