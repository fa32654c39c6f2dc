"""The words of a failed run: what its user reads (``user_message``), with the request's secrets
taken out (``redact``) and a long error cut to its head (``first_lines``)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Optional

from trainer_core.process.disk_full import DiskFullError, disk_full_message, is_disk_full
from trainer_core.schemas import SECRET_FIELDS, TrainingStartRequest


def redact(text: str, request: TrainingStartRequest) -> str:
    """``text`` with the request's secrets (``SECRET_FIELDS``) replaced by ``***``."""
    for name in SECRET_FIELDS:
        secret = getattr(request, name)
        if secret is not None and secret.get_secret_value():
            text = text.replace(secret.get_secret_value(), "***")
    return text


def user_message(exc: BaseException, out: Optional[Path] = None) -> str:
    """What a user reads when a run fails with ``exc``: the studio's own errors as they are, a full
    disk (under ``out``) or out of memory with what to do, else the error's type and first lines."""
    from trainer_core.data.files import DatasetError
    from trainer_core.models.loading import ModelLoadError
    from trainer_core.models.targets import TargetError
    from trainer_core.refusals import Refusal

    # Not imported here: a failed import of the training stack must still be reported, and a
    # DivergenceError can only come from an already loaded trainer module.
    saves = sys.modules.get("trainer_core.training.safe_saves")
    rewards = sys.modules.get("trainer_core.rewards.build")
    if isinstance(exc, (DatasetError, ModelLoadError, TargetError, Refusal)) or (
        (saves and isinstance(exc, saves.DivergenceError))
        or (rewards and isinstance(exc, (rewards.RewardError, rewards.RewardCodeError)))
    ):
        return str(exc)
    if isinstance(exc, DiskFullError):
        return str(exc)
    if is_disk_full(exc, out):  # a write outside the checkpoint saves (data cache, logs, run.json)
        return disk_full_message(
            f"a file ({first_lines(str(exc), 1, 200)})",
            out or Path.cwd(),
            "The saved checkpoints are kept",
            "resume the run from its newest checkpoint",
        )
    text = str(exc)
    if "out of memory" in text.lower() or "can't allocate memory" in text.lower():
        return f"Out of memory: {first_lines(text)} Lower batch_size or max_seq_length, or use qlora."
    return f"{type(exc).__name__}: {first_lines(text)}"


def first_lines(text: str, lines: int = 3, chars: int = 600) -> str:
    """The head of a long error (e.g. hundreds of size-mismatch lines); the rest is in worker.log."""
    kept = "\n".join(text.strip().splitlines()[:lines])[:chars]
    return kept if kept == text.strip() else kept + " ... (more in worker.log)"
