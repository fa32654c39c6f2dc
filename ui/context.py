"""What every handler of the page works on (``Context``: the one runner, the settings, the task
runner and the queue) and the form's data files as paths (``dataset_paths``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

from trainer_core.runs.job import JobRunner
from trainer_core.settings import Settings
from ui.uploads import UPLOAD_LABEL, keep_upload, split_paths


@dataclass(frozen=True)
class Context:
    """What every handler works on: the one runner and the app's settings."""

    runner: JobRunner
    settings: Settings
    tasks: Optional[Any] = None  # trainer_core.tasks.runner.TaskRunner (exports, evaluations)
    queue: Optional[Any] = None  # trainer_core.queue.dispatcher.JobQueue (jobs waiting for the machine)


def dataset_paths(upload: Optional[str], paths_text: str, settings: Settings, label: str = UPLOAD_LABEL) -> list[str]:
    """The uploaded file (kept) plus each path typed in; ``label`` names the upload field in errors."""
    kept = keep_upload(upload, settings, label)
    return ([kept] if kept else []) + split_paths(paths_text)
