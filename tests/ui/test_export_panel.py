"""The export panel's list of finished exports (``ui.export_panel``): a GGUF export's folder line
asks to keep each .gguf beside its .Modelfile only where Modelfiles were written (none for an
embedding model)."""

from __future__ import annotations

from trainer_core.tasks.schemas import TaskKind, TaskPhase, TaskRecord
from ui.export_panel import _links


def _record(files: list[str]) -> TaskRecord:
    check = {"passed": True, "checked_by": "llama.cpp", "summary": "4/4 sentences"}
    return TaskRecord(
        task_id="export_1",
        kind=TaskKind.export,
        model="job_1",
        phase=TaskPhase.completed,
        request={"format": "gguf-f16"},
        result={"files": [{"name": n} for n in files], "gguf": [{"name": files[0], "type": "f16", "check": check}]},
        output_dir="/runs/job_1/exports/export_1",
    )


def test_the_modelfile_hint_only_where_a_modelfile_was_written():
    chat = _links(_record(["job_1-f16.gguf", "job_1-f16.Modelfile", "README.md"]))
    embedder = _links(_record(["job_1-f16.gguf", "README.md"]))
    assert "(keep each `.gguf` beside its `.Modelfile`)" in chat
    assert ".Modelfile" not in embedder and "folder: `/runs/job_1/exports/export_1`" in embedder
    assert "`job_1-f16.gguf`: f16" in embedder and "llama.cpp passed: 4/4 sentences" in embedder
