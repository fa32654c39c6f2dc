"""The README.md model card written with every export (adapter zip, merged folder, GGUF).

What it says comes from the run: its request (base model, training type, settings, dataset files;
``request.json`` in the run folder, or the run history's copy passed in the task context), its
logged metrics (final training and evaluation loss at the exported step; ``metrics.jsonl``) and the
rows each dataset file gave (the data loader's lines in ``worker.log``, when present). The card
starts with Hub metadata (``base_model`` only when the base is a Hub id, as the Hub validates it).
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

from trainer_core.export.schemas import CheckResult, GGUFFile
from trainer_core.request.model import DEFAULT_MODEL
from trainer_core.serving.schemas import ModelChoice

SETTINGS = (
    "training_type",
    "num_epochs",
    "max_steps",
    "learning_rate",
    "lr_scheduler_type",
    "warmup_steps",
    "batch_size",
    "gradient_accumulation_steps",
    "max_seq_length",
    "optim",
    "weight_decay",
    "packing",
    "train_on_completions",
    "random_seed",
    "lora_r",
    "lora_alpha",
    "lora_dropout",
    "use_rslora",
    "target_modules",
)
LORA_ONLY = ("lora_r", "lora_alpha", "lora_dropout", "use_rslora", "target_modules")
ROWS_LINE = re.compile(r"trainer_core\.data\.prepare: (.+?): format (\S+), (\d+) rows")
TOKENIZED_LINE = re.compile(r"tokenized (\d+) rows")


@dataclass
class RunFacts:
    """What the card tells about the run. ``hub_base`` is the base's Hub id (None for a local folder)."""

    name: str
    base_model: str
    hub_base: Optional[str]
    request: dict[str, Any]
    step: Optional[int] = None
    train_loss: Optional[float] = None
    eval_loss: Optional[float] = None
    dataset_rows: dict[str, int] = field(default_factory=dict)  # file name -> rows used
    training_rows: Optional[int] = None

    @property
    def training_type(self) -> str:
        """lora, qlora or full."""
        return str(self.request.get("training_type") or "lora")


def hub_id(name: str) -> Optional[str]:
    """The Hub id a base model reference stands for: the id itself, a Hub cache snapshot's id, the
    default model for its materialized copy; None for any other local folder."""
    from trainer_core.models.hub import looks_like_path

    if not looks_like_path(name):
        return name
    path = Path(name).expanduser()
    for part in path.parts:
        if part.startswith("models--"):
            return part.removeprefix("models--").replace("--", "/")
    return DEFAULT_MODEL if path.name == DEFAULT_MODEL.split("/")[-1] else None


def run_folder(choice: ModelChoice) -> Path:
    """The run's output folder (a checkpoint's parent)."""
    path = Path(choice.path or ".")
    return path.parent if choice.kind == "checkpoint" else path


def gather_facts(choice: ModelChoice, run: Optional[dict[str, Any]] = None) -> RunFacts:
    """Facts for ``choice``: from ``run`` (``{"request": ..., "metrics": [...]}``, the run history's
    copy) when given, else from the run folder's ``request.json`` and ``metrics.jsonl``."""
    folder = run_folder(choice)
    run = run or {}
    request = run.get("request") or _read_json(folder / "request.json") or {}
    metrics = run.get("metrics")
    if metrics is None:
        metrics = _read_jsonl(folder / "metrics.jsonl")
    upto = [m for m in metrics if choice.step is None or (m.get("step") or 0) <= choice.step]
    train = [m for m in upto if m.get("loss") is not None]
    evals = [m for m in upto if m.get("eval_loss") is not None]
    base = choice.base_model
    facts = RunFacts(
        name=choice.id,
        base_model=hub_id(base) or base,
        hub_base=hub_id(base),
        request=request,
        step=choice.step if choice.step is not None else (train[-1]["step"] if train else None),
        train_loss=train[-1]["loss"] if train else None,
        eval_loss=evals[-1]["eval_loss"] if evals else None,
    )
    facts.dataset_rows, facts.training_rows = _rows(folder / "worker.log")
    return facts


def _read_json(path: Path) -> Optional[dict]:
    try:
        value = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return value if isinstance(value, dict) else None


def _read_jsonl(path: Path) -> list[dict]:
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError:
        return []
    found = []
    for line in lines:
        try:
            found.append(json.loads(line))
        except ValueError:
            continue
    return [m for m in found if isinstance(m, dict)]


def _rows(log_path: Path) -> tuple[dict[str, int], Optional[int]]:
    """Rows per dataset file and training rows after tokenizing, from the worker's log."""
    try:
        text = log_path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return {}, None
    rows = {m.group(1): int(m.group(3)) for m in ROWS_LINE.finditer(text)}
    tokenized = TOKENIZED_LINE.search(text)
    return rows, int(tokenized.group(1)) if tokenized else None


def render(
    facts: RunFacts,
    fmt: str,
    files: list[str],
    check: Optional[CheckResult],
    notes: list[str],
    dtype: Optional[str] = None,
    gguf: Sequence[GGUFFile] = (),
    model_kind: Any = None,
) -> str:
    """The card's Markdown for an export of format ``fmt`` holding ``files``; ``gguf``: each GGUF
    file with its format, header file type, size and check (a table in the Files section);
    ``model_kind``: the exported model's ``ModelKind`` (a merged export of a kind with its own
    ``pipeline_tag`` and ``card_usage`` says so: the Hub's task, and how to use it)."""
    kind = facts.training_type
    task = model_kind.pipeline_tag if model_kind is not None and fmt == "merged" else ""
    tags = ["finetune-studio", kind] + (["gguf"] if fmt.startswith("gguf") else []) + ([task] if task else [])
    meta = ["---"] + ([f"base_model: {facts.hub_base}"] if facts.hub_base else [])
    meta += [f"pipeline_tag: {task}"] if task else []
    meta += [f"library_name: {'peft' if fmt == 'adapter' else 'transformers'}"] if not fmt.startswith("gguf") else []
    meta += ["tags:", *(f"- {t}" for t in tags), "---", ""]
    what = {"adapter": "LoRA adapter", "merged": f"merged model ({dtype})"}.get(
        fmt, f"GGUF ({fmt.removeprefix('gguf-')})"
    )
    step = f" for {facts.step} steps" if facts.step is not None else ""
    lines = [
        f"# {facts.name}: {what}",
        "",
        f"Fine-tuned from `{facts.base_model}` with Finetune Studio ({kind}{step}).",
        "",
    ]
    lines += ["## Files", "", *(f"- `{name}`" for name in files), ""]
    if gguf:
        lines += ["| GGUF file | format | file type (header) | size | check |", "|---|---|---|---|---|"]
        lines += [
            f"| `{g.name}` | {g.type} | {g.file_type} | {g.size_bytes / 1e6:.1f} MB | "
            f"{'passed' if g.check and g.check.passed else 'FAILED'}: {g.check.summary if g.check else 'not checked'} |"
            for g in gguf
        ]
        lines.append("")
    lines += _data_section(facts) + _settings_section(facts) + _results_section(facts)
    usage = model_kind.card_usage(facts.request) if model_kind is not None and fmt == "merged" else None
    lines += _check_section(check) + (_code_section(usage) if usage else _usage_section(facts, fmt, files, model_kind))
    if notes:
        lines += ["## Notes", "", *(f"- {n}" for n in notes), ""]
    return "\n".join(meta + lines)


def _data_section(facts: RunFacts) -> list[str]:
    req = facts.request
    files = [Path(p).name for p in req.get("local_datasets") or []]
    lines = ["## Training data", ""]
    if req.get("hf_dataset"):
        lines.append(f"- Hub dataset `{req['hf_dataset']}` (split {req.get('train_split') or 'train'})")
    for name in files:
        rows = facts.dataset_rows.get(name)
        lines.append(f"- `{name}`" + (f": {rows} rows used" if rows is not None else ""))
    start, end = req.get("dataset_slice_start"), req.get("dataset_slice_end")
    if start or end:
        lines.append(f"- rows {start or 0} to {end if end is not None else 'the end'} of each file")
    if facts.training_rows is not None:
        lines.append(f"- {facts.training_rows} training rows in all")
    return lines + ([""] if len(lines) > 2 else ["- not recorded", ""])


def _settings_section(facts: RunFacts) -> list[str]:
    rows = [
        (k, facts.request[k])
        for k in SETTINGS
        if k in facts.request and not (facts.training_type == "full" and k in LORA_ONLY)
    ]
    if not rows:
        return []
    table = ["| setting | value |", "|---|---|"]
    table += [f"| {k} | {', '.join(map(str, v)) if isinstance(v, list) else v} |" for k, v in rows]
    return ["## Settings", "", *table, ""]


def _results_section(facts: RunFacts) -> list[str]:
    lines = []
    if facts.train_loss is not None:
        lines.append(f"- final training loss: {facts.train_loss:.4f}" + (f" (step {facts.step})" if facts.step else ""))
    if facts.eval_loss is not None:
        lines.append(f"- final evaluation loss: {facts.eval_loss:.4f}")
    return ["## Results", "", *lines, ""] if lines else []


def _check_section(check: Optional[CheckResult]) -> list[str]:
    if check is None:
        return []
    lines = [
        "## Export check",
        "",
        f"{'Passed' if check.passed else 'FAILED'}: {check.summary}, answering {check.prompts_total} fixed "
        f"prompts greedily, compared with the run as trained (float32).",
        "",
        f"Required: {check.required}.",
        "",
    ]
    lines += [f"- explained: {n}" for n in check.near_ties]
    lines += [f"- problem: {p}" for p in check.problems]
    return lines + ([""] if check.near_ties or check.problems else [])


def _code_section(code: list[str]) -> list[str]:
    return ["## How to use", "", "```python", *code, "```", ""]


def clip_lines(path: str, rate: str) -> list[str]:
    """Usage lines that read the audio file ``path`` into ``audio``: mono float32 at ``rate`` (a
    Python expression) with soundfile and soxr, as the studio reads clips (after ``sf`` / ``soxr``
    are imported)."""
    return [
        f'audio, found = sf.read("{path}", dtype="float32", always_2d=True)',
        f"audio = soxr.resample(audio.mean(axis=1), found, {rate})  # mono, at the model's rate",
    ]


def _usage_section(facts: RunFacts, fmt: str, files: list[str], model_kind: Any = None) -> list[str]:
    """How to load the export: an adapter on its base with the kind's auto class (and its processor
    where its rows carry images or audio), a merged causal LM, or a GGUF in the programs that run it."""
    base = facts.hub_base or facts.base_model
    if fmt == "adapter":
        auto = model_kind.auto_class if model_kind is not None else "AutoModelForCausalLM"
        reader = "processor" if model_kind is not None and model_kind.media else "tokenizer"
        code = [
            "from peft import PeftModel",
            f"from transformers import {auto}, Auto{reader.title()}",
            "",
            f'base = {auto}.from_pretrained("{base}")',
            'model = PeftModel.from_pretrained(base, "PATH_TO_THIS_FOLDER")  # the unzipped files',
            f'{reader} = Auto{reader.title()}.from_pretrained("PATH_TO_THIS_FOLDER")',
        ]
        return ["## How to load", "", "```python", *code, "```", ""]
    if fmt == "merged":
        code = [
            "from transformers import AutoModelForCausalLM, AutoTokenizer",
            "",
            'model = AutoModelForCausalLM.from_pretrained("PATH_TO_THIS_FOLDER")',
            'tokenizer = AutoTokenizer.from_pretrained("PATH_TO_THIS_FOLDER")',
            'ids = tokenizer.apply_chat_template([{"role": "user", "content": "Hi"}], add_generation_prompt=True, return_tensors="pt")',
            "print(tokenizer.decode(model.generate(ids, max_new_tokens=64)[0]))",
        ]
        return ["## How to load", "", "```python", *code, "```", ""]
    gguf = next((f for f in files if f.endswith(".gguf")), "MODEL.gguf")
    return [
        "## How to use",
        "",
        "The chat template and the end-of-turn token are in the file's metadata.",
        "",
        "```sh",
        f"llama-cli -m {gguf} -cnv   # llama.cpp's own program (a llama.cpp release or `brew install llama.cpp`)",
        f"ollama create my-model -f {Path(gguf).stem}.Modelfile && ollama run my-model   # Ollama",
        f"lms import {gguf}   # LM Studio (or copy it under ~/.lmstudio/models/<you>/<model>/)",
        "```",
        "",
        "In Python (transformers dequantizes it):",
        "",
        "```python",
        "from transformers import AutoModelForCausalLM",
        f'model = AutoModelForCausalLM.from_pretrained("PATH_TO_THIS_FOLDER", gguf_file="{gguf}")',
        "```",
        "",
    ]
