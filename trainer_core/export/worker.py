"""The export task's entry point: ``run_export(request, context, events, stop)`` (the
``TaskRunner`` target, in a spawned worker process; the CLI calls ``export`` in its own process).

``request`` is ``ExportRequest.model_dump()``; ``context`` has ``choice`` (``ModelChoice`` as a
dict), ``models_dir``, ``output_dir`` (the task's new, empty folder: the only place written),
``task_id``, and from ``start.start_export`` ``converter_dir`` and ``run`` (the run history's
request and metrics, for the card). Events: progress, then one ``result`` (``ExportResult`` as a
dict; ``passed`` False when the check failed: the files stay, marked failed) or one ``error``
(``{"message", "kind": "input" | "internal"}``: the runner removes the folder). Cancel (``stop``)
ends it at the next stage (or within 0.2 s while the converter runs) without an event.
"""

from __future__ import annotations

import logging
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

from trainer_core.export.gguf_convert import Cancelled, ConversionFailed
from trainer_core.export.job import ExportInputError, ExportJob, Progress
from trainer_core.export.schemas import ExportRequest, ExportResult
from trainer_core.llamacpp.client import LlamaCppFailed, LlamaCppMissing
from trainer_core.model_kind import kind_for_folder
from trainer_core.process.disk_full import free_bytes, is_disk_full
from trainer_core.serving.schemas import ModelChoice
from trainer_core.tasks.schemas import TaskEvent

log = logging.getLogger(__name__)


class ExportError(RuntimeError):
    """An export failed; ``kind`` is ``input`` (the user can fix it: the message says how) or
    ``internal``. Nothing of it is kept."""

    def __init__(self, message: str, kind: str = "internal") -> None:
        super().__init__(message)
        self.kind = kind


def exporter(fmt: str) -> Callable[[ExportJob], ExportResult]:
    """The function that makes format ``fmt`` of a text run (a kind's own: ``ModelKind.exporter``)."""
    if fmt == "adapter":
        from trainer_core.export.adapter_zip import export_adapter

        return export_adapter
    if fmt == "merged":
        from trainer_core.export.merged import export_merged

        return export_merged
    from trainer_core.export.gguf_export import export_gguf

    return export_gguf


def export(request: ExportRequest, context: dict[str, Any], events: Any, stop: Any) -> ExportResult:
    """Make and check the export in ``context["output_dir"]``. Raises ExportError (nothing useful
    written; the caller removes the folder) or Cancelled."""
    from trainer_core.models.loading import ModelLoadError
    from trainer_core.settings import get_settings

    out = Path(context["output_dir"])
    job = ExportJob(
        request=request,
        choice=ModelChoice(**context["choice"]),
        out=out,
        models_dir=Path(context.get("models_dir") or get_settings().models_dir),
        converter_dir=Path(context.get("converter_dir") or get_settings().gguf_converter_dir),
        llama_cpp_dir=Path(context.get("llama_cpp_dir") or get_settings().llama_cpp_dir),
        progress=Progress(events, stop),
        run_info=context.get("run"),
    )
    kind = kind_for_folder(Path(job.choice.path)) if job.choice.path else None  # the run's own folder
    made = (kind.exporter(request.format) if kind is not None else None) or exporter(request.format)
    try:
        return made(job)
    except Cancelled:
        raise
    except (ExportInputError, LlamaCppMissing) as exc:
        raise ExportError(str(exc), "input") from None
    except Exception as exc:
        if is_disk_full(exc, out):  # OSError 28, safetensors' and torch.save's own write errors (process.disk_full)
            raise ExportError(disk_full_message(out), "internal") from None
        if isinstance(exc, OSError):
            raise ExportError(f"could not write the export: {exc}", "internal") from exc
        if isinstance(exc, (ModelLoadError, ConversionFailed, LlamaCppFailed)):
            raise ExportError(str(exc), "internal") from exc
        if isinstance(exc, MemoryError):
            raise ExportError(
                "out of memory while exporting; free memory (stop the chat model) and try again", "internal"
            ) from None
        raise


def disk_full_message(out: Path) -> str:
    """The error for a full disk, naming the disk (the folder's mount) and what is free now."""
    free = free_bytes(out)
    now = f" ({free / 1e6:.0f} MB free now)" if free is not None else ""
    return (
        f"Disk full: the disk holding {out.parent} is full (no space left on device{now}): free space there and "
        "export again; nothing of this export was kept"
    )


def run_export(request: dict[str, Any], context: dict[str, Any], events: Any, stop: Any) -> None:
    """Process entry point (see the module docstring). Never raises."""
    from trainer_core.process.parent import exit_with_parent
    from trainer_core.serving.worker import quiet_libraries

    exit_with_parent()
    try:
        quiet_libraries()
        result = export(ExportRequest(**request), context, events, stop)
    except Cancelled:
        return
    except ExportError as exc:
        log.error("export failed: %s", exc)
        events.put((TaskEvent.ERROR, {"message": str(exc), "kind": exc.kind}))
        return
    except BaseException as exc:  # noqa: BLE001 - the process boundary: report everything
        log.error("export failed:\n%s", traceback.format_exc())
        events.put(
            (TaskEvent.ERROR, {"message": f"the export failed: {type(exc).__name__}: {exc}", "kind": "internal"})
        )
        return
    events.put((TaskEvent.RESULT, result.model_dump()))
