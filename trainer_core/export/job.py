"""What every export shares: the job's inputs, progress with per-stage timing and Cancel, the
reference answers of the run as trained, the check of an exported model, and the file listing.

Progress goes out as ``(TaskEvent.PROGRESS, {"fraction": 0..1, "message": str})`` on ``events``
(anything with ``put``); ``stop`` (anything with ``is_set``) is checked at each stage's start and
while the GGUF converter runs, and raises ``Cancelled``.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

from trainer_core.export import check as checks
from trainer_core.export.gguf_convert import Cancelled
from trainer_core.export.schemas import CheckResult, ExportedFile, ExportRequest, ExportResult, GGUFFile
from trainer_core.refusals import Refusal
from trainer_core.serving.schemas import ModelChoice
from trainer_core.tasks.schemas import TaskEvent

log = logging.getLogger(__name__)
MESSAGE_EVERY_S = 0.5


class ExportInputError(Refusal):
    """The export cannot be made from this input (unsupported architecture, no converter, ...);
    the message says why and what to do instead."""

    code = "export_input_unusable"


class Progress:
    """Stages with a fraction each, timed into ``seconds`` (stage name -> wall seconds)."""

    def __init__(self, events: Any, stop: Any) -> None:
        self.events, self.stop = events, stop
        self.seconds: dict[str, float] = {}
        self.fraction, self._stage, self._began, self._sent = 0.0, None, time.monotonic(), 0.0

    def begin(self, stage: str, fraction: float, message: str) -> None:
        """Close the running stage, start ``stage`` at ``fraction`` (0..1; the bar never goes back).
        Raises Cancelled."""
        self.end()
        if self.stop is not None and self.stop.is_set():
            raise Cancelled("cancelled")
        self._stage, self._began, self.fraction = stage, time.monotonic(), max(self.fraction, fraction)
        self.say(message, force=True)
        log.info("%s: %s", stage, message)

    def say(self, message: str, force: bool = False, fraction: Optional[float] = None) -> None:
        """Send ``message`` (at most every ``MESSAGE_EVERY_S`` seconds unless ``force``)."""
        if fraction is not None:
            self.fraction = max(self.fraction, min(1.0, fraction))
        now = time.monotonic()
        if force or now - self._sent >= MESSAGE_EVERY_S:
            self._sent = now
            self.events.put((TaskEvent.PROGRESS, {"fraction": round(self.fraction, 4), "message": message[:300]}))

    def end(self) -> None:
        """Record the running stage's seconds."""
        if self._stage is not None:
            self.seconds[self._stage] = round(self.seconds.get(self._stage, 0.0) + time.monotonic() - self._began, 2)
            self._stage = None

    def cancelled(self) -> bool:
        """True once Cancel was pressed."""
        return self.stop is not None and self.stop.is_set()


@dataclass
class ExportJob:
    """One export's inputs: the request, the resolved choice, the (new, empty) output folder, where
    models and the GGUF converter are, and the run history's facts about the run (or None)."""

    request: ExportRequest
    choice: ModelChoice
    out: Path
    models_dir: Path
    converter_dir: Path
    progress: Progress
    llama_cpp_dir: Optional[Path] = None
    run_info: Optional[dict[str, Any]] = None
    notes: list[str] = field(default_factory=list)
    began: float = field(default_factory=time.monotonic)

    @property
    def qlora(self) -> bool:
        """The run trained a QLoRA adapter (4-bit base)."""
        from trainer_core.export.card import gather_facts

        request = (self.run_info or {}).get("request") or gather_facts(self.choice).request
        return request.get("training_type") == "qlora"

    @property
    def stem(self) -> str:
        """A file-name stem for the export: the choice id with ``/`` as ``-`` (job_x-checkpoint-3)."""
        return re.sub(r"[^A-Za-z0-9._-]+", "-", self.choice.id).strip("-") or "export"


@dataclass
class Reference:
    """The check prompts' ids and the run's own greedy answers to them."""

    prompts: list[list[int]]
    answers: checks.Answers


def reference(job: ExportJob, model: Any, tokenizer: Any) -> Reference:
    """The run as trained answers the check prompts (stage ``reference``)."""
    job.progress.begin(
        "reference", 0.15, f"Answering {len(checks.CHECK_PROMPTS)} check prompts with the run as trained"
    )
    return make_reference(model, tokenizer)


def make_reference(model: Any, tokenizer: Any) -> Reference:
    """``model``'s greedy answers to the check prompts rendered by ``tokenizer``."""
    prompts = checks.prompt_ids(tokenizer)
    return Reference(prompts, checks.greedy_answers(model, prompts))


def judge(label: str, rule: str, ref: Reference, model: Any, tokenizer: Any, problems: list[str] = ()) -> CheckResult:
    """Answer the check prompts with ``model`` and compare with ``ref`` by ``checks.RULES[rule]``;
    the answers' texts go into ``samples``."""
    forced = checks.forced_predictions(model, ref.prompts, ref.answers.tokens)
    free = checks.exported_answers(model, ref.prompts, ref.answers.tokens, forced)
    result = checks.compare(label, ref.answers, free, forced, checks.RULES[rule], problems)
    result.samples = [
        {"prompt": prompt, "adapter": tokenizer.decode(want), "exported": tokenizer.decode(got)}
        for prompt, want, got in zip(checks.CHECK_PROMPTS, ref.answers.tokens, free)
    ]
    return result


def listing(out: Path) -> list[ExportedFile]:
    """The files under ``out`` (relative names, sorted), hidden temporary folders left out."""
    files = [
        p
        for p in sorted(Path(out).rglob("*"))
        if p.is_file() and not any(part.startswith(".") for part in p.relative_to(out).parts)
    ]
    return [ExportedFile(name=str(p.relative_to(out)), size_bytes=p.stat().st_size) for p in files]


def write_card(
    job: ExportJob, files: list[str], check: Optional[CheckResult], dtype: Optional[str], gguf: Sequence[GGUFFile] = ()
) -> str:
    """The model card's text for this export (stage ``card``; a merged folder's own kind says its
    Hub task and usage, ``ModelKind.card_usage``; an adapter's loads with its base's kind's class)."""
    from trainer_core.export.card import gather_facts, render
    from trainer_core.model_kind import adapter_base_config, kind_for_folder, kind_of

    job.progress.begin("card", 0.97, "Writing the model card")
    facts = gather_facts(job.choice, job.run_info)
    fmt = job.request.format
    kind = (
        kind_for_folder(job.out)
        if fmt == "merged"
        else kind_of(adapter_base_config(job.out))
        if fmt == "adapter"
        else None
    )
    return render(facts, fmt, files, check, job.notes, dtype, gguf, kind)


def result(
    job: ExportJob, check: Optional[CheckResult], dtype: Optional[str], gguf: Sequence[GGUFFile] = ()
) -> ExportResult:
    """The export's result: its files, the check (the first GGUF file's, for a GGUF export),
    each GGUF file with its checks, and the timings. Passed when every file's check passed (a
    file's ``second_opinion``, transformers' read-back beside llama.cpp's check, is shown, never
    counted: llama.cpp is what runs the file)."""
    job.progress.end()
    files = listing(job.out)
    passed = check.passed if check is not None else True
    for g in gguf:
        passed = passed and (g.check is None or g.check.passed)
    return ExportResult(
        format=job.request.format,
        dtype=dtype,
        files=files,
        size_bytes=sum(f.size_bytes for f in files),
        check=check,
        passed=passed,
        seconds=round(time.monotonic() - job.began, 2),
        notes=job.notes,
        stage_seconds=dict(job.progress.seconds),
        gguf=list(gguf),
    )
