"""The studio's own ``/v1`` for recipe tests: the API app over a real ``ChatEngine`` (its real
inference worker loads the model), behind the API token. With a model folder (the tiny model), a
completed full-model run holding a copy of it is served under its run id; with a GGUF file, that
file as the run's export, answered by llama.cpp (``EXPORT/TYPE``); without either, ``base`` is the
default model (the real SmolLM2 in transformers)."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Optional

from tests.e2e.conftest import TOKEN, ServerThread
from tests.support import fake_workers
from tests.support.chat_server import api_app

RUN = "job_20251207_090000_5e5e5e5e"
EXPORT = "export-20251207-091500-5e5e5e"


@contextmanager
def studio_v1(settings, model_folder: Optional[Path] = None, gguf: Optional[Path] = None) -> Iterator[tuple[str, str]]:
    """(base URL of /v1, model id) while the server runs; ``settings.api_token`` must be ``TOKEN``
    (and ``settings.llama_cpp_dir`` the llama.cpp build, for ``gguf``)."""
    from trainer_core.runs.job import JobRunner
    from trainer_core.runs.store import RunStore
    from trainer_core.serving.engine import ChatEngine
    from trainer_core.tasks.export_models import ExportModels
    from trainer_core.tasks.store import TaskStore

    assert settings.api_token.get_secret_value() == TOKEN
    runner = JobRunner(
        worker_target=fake_workers.stepping_worker, runs_dir=settings.runs_dir, store=RunStore(settings.db_path)
    )
    model = "base"
    if model_folder is not None:
        folder = settings.runs_dir / RUN
        shutil.copytree(model_folder, folder)
        runner.store.create_run(RUN, {"model_name": str(model_folder)}, str(folder), "completed")
        model = RUN
    models = None
    if gguf is not None:
        model = _export(settings, runner, gguf)
        models = ExportModels(TaskStore(settings.db_path), runner.store, settings)
    engine = ChatEngine(runner, settings, models=models)
    try:
        with ServerThread(api_app(settings, runner, engine)) as server:
            yield f"{server.url.rstrip('/')}/v1", model
    finally:
        engine.unload()
        runner.stop(save=False)
        runner.wait(10)
        runner.store.close()


def topics_recipe(endpoint: str, model: str, topics: list[str], **changes) -> dict:
    """A recipe over ``topics`` with one short model column (``answer``, 4 tokens) and a length
    gate on the topic (topics under 3 characters are dropped as ``length``): cheap to run."""
    data = {
        "name": "topics_qa",
        "topics": topics,
        "model": {
            "endpoint": endpoint,
            "model": model,
            "api_key_env": "STUDIO_API_TOKEN",
            "timeout_s": 120,
            "inference_parameters": {"max_tokens": 4, "max_parallel_requests": 1},
        },
        "columns": [
            {"name": "question", "column_type": "expression", "expr": "What is a {{ topic }}?"},
            {"name": "answer", "column_type": "llm-text", "prompt": "{{ question }} Answer in one word."},
        ],
        "gates": {"length": [{"column": "topic", "min_chars": 3, "max_chars": 50}]},
        "output": {"format": "alpaca", "name": "topics", "fields": {"instruction": "question", "output": "answer"}},
    }
    data.update(changes)
    return data


@contextmanager
def task_runner(settings) -> Iterator:
    """A ``TaskRunner`` over a job runner whose training is a stub (nothing trains here); the
    running task is stopped at the end."""
    from trainer_core.runs.job import JobRunner
    from trainer_core.runs.store import RunStore
    from trainer_core.tasks.runner import TaskRunner

    jobs = JobRunner(
        worker_target=fake_workers.stepping_worker,
        runs_dir=settings.runs_dir,
        store=RunStore(settings.db_path),
        warm_modules=(),
    )
    tasks = TaskRunner(jobs, settings)
    try:
        yield tasks
    finally:
        tasks.cancel()
        tasks.wait(60)
        jobs.stop(save=False)
        jobs.wait(10)


def _export(settings, runner, gguf: Path) -> str:
    """``gguf`` copied into a completed run's export folder, recorded as its export task; the
    model id the studio lists it under."""
    from trainer_core.tasks.schemas import TaskKind, TaskPhase, TaskRecord
    from trainer_core.tasks.store import TaskStore

    kind = gguf.stem.rsplit("-", 1)[-1].lower()
    folder = settings.runs_dir / RUN / "exports" / EXPORT
    folder.mkdir(parents=True)
    shutil.copyfile(gguf, folder / f"{RUN}-{kind}.gguf")
    runner.store.create_run(
        RUN, {"model_name": "HuggingFaceTB/SmolLM2-135M-Instruct"}, str(folder.parents[1]), "completed"
    )
    entry = {"name": f"{RUN}-{kind}.gguf", "type": kind, "check": {"passed": True}}
    record = TaskRecord(
        task_id=EXPORT,
        kind=TaskKind.export,
        job_id=RUN,
        model=RUN,
        phase=TaskPhase.completed,
        output_dir=str(folder),
        result={"format": f"gguf-{kind}", "gguf": [entry]},
    )
    TaskStore(settings.db_path).save(record)
    return f"{EXPORT}/{kind}"
