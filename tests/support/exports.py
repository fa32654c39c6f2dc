"""An export run in process (``export.worker.export``, the export task's own code) for the kinds'
export tests: a run folder's final weights exported in a format into a fresh folder."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any


def run_export(run: Path, base: Path, fmt: str, out: Path, **fields: Any) -> tuple[Any, list[str]]:
    """``export.worker.export`` of ``run`` (its final weights, job id = the folder's name, on
    ``base``) in ``fmt`` into ``out`` (created); ``fields`` go to ``ExportRequest`` (e.g. dtype).
    Returns (ExportResult, the progress messages in order)."""
    from trainer_core.export.schemas import ExportRequest
    from trainer_core.export.worker import export
    from trainer_core.serving.choices import weights_choice
    from trainer_core.settings import get_settings

    settings = get_settings()
    choice = weights_choice(run, "final", run.name, str(base), settings.models_dir, job_id=run.name)
    out.mkdir()
    events: list = []
    context = {
        "choice": choice.model_dump(),
        "output_dir": str(out),
        "models_dir": str(settings.models_dir),
        "converter_dir": str(settings.gguf_converter_dir),
        "llama_cpp_dir": str(settings.llama_cpp_dir),
    }
    queue = type("Q", (), {"put": staticmethod(events.append)})()
    result = export(ExportRequest(model=choice.id, format=fmt, **fields), context, queue, threading.Event())
    return result, [e[1]["message"] for e in events]
