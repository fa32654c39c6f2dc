"""The whole app (login + token on) with a fake chat engine, for the OpenAI-route and share-link tests."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest

from tests.e2e.conftest import PASSWORD, TOKEN, USER, ServerThread
from tests.support.fake_engine import FakeEngine

JOB = "job_20250102_090000_0a0b0c0d"
OTHER_JOB = "job_20250103_090000_1a1b1c1d"
CHECKPOINT = f"{JOB}/checkpoint-2"
LABEL = '<b>tuned</b> & "friends" </script>'  # must be escaped wherever it is shown


@dataclass
class ChatStudio:
    """What the tests reach: the app's settings, runner, fake engine, share links and URL."""

    settings: Any
    runner: Any
    engine: FakeEngine
    links: Any
    url: str
    gradio_cookie_id: str  # Gradio's login cookie is named access-token-<this>

    def api(self, token: str = TOKEN) -> httpx.Client:
        """An HTTP client sending ``token`` as the bearer token."""
        return httpx.Client(base_url=self.url, headers={"Authorization": f"Bearer {token}"}, timeout=30)

    def plain(self) -> httpx.Client:
        """An HTTP client with no credentials."""
        return httpx.Client(base_url=self.url, timeout=30)


@pytest.fixture(scope="module")
def chat_studio(tmp_path_factory) -> Iterator[ChatStudio]:
    """The app with two runs in the history (``JOB`` with a checkpoint, ``OTHER_JOB``) that the fake
    engine can answer with."""
    from server import build_app
    from tests.support import fake_workers
    from trainer_core.runs.job import JobRunner
    from trainer_core.runs.store import RunStore
    from trainer_core.settings import Settings

    settings = Settings(
        data_dir=tmp_path_factory.mktemp("chat"),
        username=USER,
        password=PASSWORD,
        api_token=TOKEN,
        login_attempts_per_minute=10_000,
    )
    runner = JobRunner(
        worker_target=fake_workers.stepping_worker, runs_dir=settings.runs_dir, store=RunStore(settings.db_path)
    )
    for job in (JOB, OTHER_JOB):
        runner.store.create_run(job, {"max_steps": 2}, str(settings.runs_dir / job), "completed")
    engine = FakeEngine()
    engine.add(JOB, label=LABEL)
    engine.add(CHECKPOINT)
    engine.add(OTHER_JOB)
    app = build_app(settings, runner)
    app.state.engine = engine  # the routes read it at each request (the UI keeps the real one, unused here)
    with ServerThread(app) as server:
        yield ChatStudio(
            settings, runner, engine, app.state.share_links, server.url.rstrip("/"), app.state.gradio_app.cookie_id
        )


def api_app(settings: Any, runner: Any, engine: FakeEngine, throttle_limit: int = 10_000) -> Any:
    """The API part of the app alone (no UI): the training routes, /v1 and share links, behind the
    failed-token throttle (``throttle_limit`` failures a minute)."""
    from fastapi import FastAPI

    from api import errors, openai_routes
    from api.throttle import FailureThrottle, ThrottleMiddleware
    from api.train_routes import router

    app = FastAPI()
    app.state.settings, app.state.runner, app.state.engine = settings, runner, engine
    errors.install(app)
    app.add_middleware(ThrottleMiddleware, throttle=FailureThrottle(throttle_limit))
    app.include_router(router)
    openai_routes.install(app)
    return app


@pytest.fixture(autouse=True)
def fresh_engine(request) -> None:
    """Each test starts with a healthy, idle, fast engine."""
    if "chat_studio" not in request.fixturenames:
        return
    engine: FakeEngine = request.getfixturevalue("chat_studio").engine
    engine.busy, engine.crash_after, engine.token_delay_s = False, None, 0.0
    engine.no_weights.clear()
    engine.calls.clear()
    engine.tool_requests.clear()
    engine.prompts.clear()
    engine.closed.clear()
    engine.finished.clear()


def sse_data(response: httpx.Response) -> list[Any]:
    """The ``data:`` payloads of an SSE answer, JSON-decoded (``[DONE]`` kept as the string)."""
    found = []
    for line in response.iter_lines():
        if line.startswith("data: "):
            data = line[len("data: ") :]
            found.append(data if data == "[DONE]" else json.loads(data))
    return found


def chat_body(text: str = "hello there", **extra: Any) -> dict[str, Any]:
    """A chat request with one user message."""
    return {"model": JOB, "messages": [{"role": "user", "content": text}], **extra}
