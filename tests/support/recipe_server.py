"""The studio's own ``/v1`` for recipe tests: the API app over a real ``ChatEngine`` (its real
inference worker loads the model), behind the API token. With a model folder (the tiny model), a
completed full-model run holding a copy of it is served under its run id; without, ``base`` is the
default model (the real SmolLM2)."""

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


@contextmanager
def studio_v1(settings, model_folder: Optional[Path] = None) -> Iterator[tuple[str, str]]:
    """(base URL of /v1, model id) while the server runs; ``settings.api_token`` must be ``TOKEN``."""
    from trainer_core.runs.job import JobRunner
    from trainer_core.runs.store import RunStore
    from trainer_core.serving.engine import ChatEngine

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
    engine = ChatEngine(runner, settings)
    try:
        with ServerThread(api_app(settings, runner, engine)) as server:
            yield f"{server.url.rstrip('/')}/v1", model
    finally:
        engine.unload()
        runner.stop(save=False)
        runner.wait(10)
        runner.store.close()
