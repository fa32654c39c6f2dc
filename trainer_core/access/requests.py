"""Checks on a request's local paths before a job starts: confinement to allowed roots, existence."""

from __future__ import annotations

from pathlib import Path
from typing import Iterable

from trainer_core.access.paths import PathNotAllowed, confine
from trainer_core.schemas import TrainingStartRequest


class MissingPaths(ValueError):
    """Dataset files that do not exist; ``paths`` holds up to three of them, resolved."""

    def __init__(self, paths: list[str]) -> None:
        self.paths = paths[:3]
        super().__init__(f"local_datasets: file not found: {', '.join(self.paths)}")


def checked_request(request: TrainingStartRequest, roots: Iterable[Path]) -> TrainingStartRequest:
    """A copy of ``request`` with every local path resolved and confined to ``roots``.

    Raises PathNotAllowed (a path outside the roots, through ``..`` or a symlink) or MissingPaths
    (dataset files that do not exist)."""
    roots = list(roots)
    train = [str(confine(p, roots, "local_datasets")) for p in request.local_datasets]
    evals = [str(confine(p, roots, "local_eval_datasets")) for p in request.local_eval_datasets]
    updates: dict = {"local_datasets": train, "local_eval_datasets": evals}
    for field in ("output_dir", "resume_from_checkpoint"):
        value = getattr(request, field)
        if value:
            updates[field] = str(confine(value, roots, field))
    missing = [p for p in train + evals if not Path(p).is_file()]
    if missing:
        raise MissingPaths(missing)
    return request.model_copy(update=updates)


__all__ = ["MissingPaths", "PathNotAllowed", "checked_request"]
