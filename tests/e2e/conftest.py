"""A real app on a loopback port (in this process, ``prevent_thread_lock``) and a gradio_client for it."""

from __future__ import annotations

import itertools
import json
import os
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from trainer_core.fieldmeta import default
from trainer_core.vocabulary import Phase
from ui.form import FORM_FIELDS, widget_value

PORTS_PER_PROCESS = 1000
_next_port = itertools.count()


def free_port() -> int:
    """A free loopback port from this test process's own block (20000 + 1000 x the pytest-xdist
    worker's number, below Linux's ephemeral range), so two test processes never race for one port
    between this check and the server's bind. Raises RuntimeError when the whole block is taken."""
    worker = os.environ.get("PYTEST_XDIST_WORKER", "gw0")
    first = 20000 + PORTS_PER_PROCESS * (int(worker[2:]) if worker[2:].isdigit() else 0)
    for _ in range(PORTS_PER_PROCESS):
        port = first + next(_next_port) % PORTS_PER_PROCESS
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise RuntimeError(f"no free port in {first}..{first + PORTS_PER_PROCESS - 1}")


class ServerThread:
    """uvicorn serving ``app`` on a free loopback port in a daemon thread."""

    def __init__(self, app) -> None:
        import uvicorn

        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}/"
        self.server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=self.port, log_level="warning"))
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    def __enter__(self) -> ServerThread:
        self.thread.start()
        wait_for(lambda: self.server.started, timeout_s=30, what="server start")
        return self

    def __exit__(self, *exc) -> None:
        self.server.should_exit = True
        self.thread.join(10)


@pytest.fixture(scope="session")
def studio_settings(tmp_path_factory, datasets_dir, tiny_model_dir, tiny_vl_dir):
    """Settings for a test app: a temporary data dir; the shared datasets and the tiny models'
    folders (text and vision) are allowed folders."""
    from trainer_core.settings import Settings

    return Settings(
        data_dir=tmp_path_factory.mktemp("studio"),
        allowed_paths=allowed(datasets_dir, tiny_model_dir.parent, tiny_vl_dir.parent),
    )


def allowed(*folders: Path) -> str:
    """``STUDIO_ALLOWED_PATHS`` / ``Settings.allowed_paths`` for these folders."""
    return os.pathsep.join(str(folder) for folder in folders)


@pytest.fixture(scope="session")
def app_server(studio_settings):
    """(runner, url) of the whole app (API + UI) served on a loopback port."""
    from server import build_app

    app = build_app(studio_settings)
    runner = app.state.runner
    with ServerThread(app) as server:
        yield runner, server.url
        runner.stop(save=False)
        runner.wait(10)


@pytest.fixture
def client(app_server):
    from gradio_client import Client

    runner, url = app_server
    runner.wait(60)  # the previous test's job has ended
    return Client(url, verbose=False)


def form_args(dataset: str, **overrides: Any) -> list[Any]:
    """Positional inputs of the ``/start`` endpoint, as the page would send them."""
    values = {name: widget_value(name, default(name)) for name in FORM_FIELDS}  # as the page shows a new form
    values.update(overrides)
    return [None, dataset, None, "", *(values[name] for name in FORM_FIELDS)]


SCREENSHOTS = Path(__file__).resolve().parents[2] / "docs" / "screenshots"


def screenshot(page, tmp_path: Path, name: str) -> None:
    """Save a screenshot of ``page`` in ``tmp_path``, and in ``docs/screenshots/`` (the README's)
    when STUDIO_UPDATE_SCREENSHOTS=1."""
    import os

    page.screenshot(path=str(tmp_path / name))
    if os.environ.get("STUDIO_UPDATE_SCREENSHOTS") == "1":
        SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(SCREENSHOTS / name))


def statuses(job) -> Iterator[dict]:
    """The raw status dict of every update a ``/start`` or ``/watch`` job streams."""
    for output in job:
        yield output[1]


def wait_for(predicate, timeout_s: float = 120.0, what: str = "condition") -> None:
    """Poll ``predicate`` every 50 ms; fail the test after ``timeout_s`` seconds."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.05)
    pytest.fail(f"timed out after {timeout_s:.0f} s waiting for {what}")


def is_training(runner, min_step: int = 1) -> bool:
    """True once the current job is training and has logged ``min_step``."""
    status = runner.status()
    return status.is_training_running and status.phase == Phase.training and status.details.get("step", 0) >= min_step


# ----- an attacker's view of the app (tests/e2e/test_security.py, test_fuzz_doors.py) -----
USER, PASSWORD, TOKEN = "ada", "lovelace-1843", "test-token-0123456789abcdef"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
CANARY = "CANARY-7f3a9c-must-not-leak"


@pytest.fixture(scope="module")
def outside(tmp_path_factory) -> Path:
    """A folder outside every allowed folder, holding a valid dataset with the canary in it."""
    folder = tmp_path_factory.mktemp("outside")
    rows = [{"instruction": f"say {CANARY}", "input": "", "output": CANARY}] * 8
    (folder / "canary.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (folder / "canary.json").write_text(json.dumps(rows))
    model = folder / "model"
    model.mkdir()
    (model / "config.json").write_text(json.dumps({"model_type": CANARY}))
    return folder


def locked_settings(data_dir: Path, allowed_paths: str) -> Any:
    """Settings of the whole app with login (``USER`` / ``PASSWORD``) and the API ``TOKEN`` on."""
    from trainer_core.settings import Settings

    return Settings(
        data_dir=data_dir,
        allowed_paths=allowed_paths,
        username=USER,
        password=PASSWORD,
        api_token=TOKEN,
        login_attempts_per_minute=10_000,
    )


@pytest.fixture(scope="module")
def studio(tmp_path_factory, datasets_dir):
    """(settings, runner, url) of the whole app with login + token, a fake stepping worker."""
    from server import build_app
    from tests.support import fake_workers
    from trainer_core.runs.job import JobRunner
    from trainer_core.runs.store import RunStore
    from trainer_core.settings import Settings

    data = tmp_path_factory.mktemp("data")
    settings = Settings(
        data_dir=data,
        allowed_paths=str(datasets_dir),
        username=USER,
        password=PASSWORD,
        api_token=TOKEN,
        login_attempts_per_minute=10_000,
    )
    runner = JobRunner(
        worker_target=fake_workers.stepping_worker, runs_dir=settings.runs_dir, store=RunStore(settings.db_path)
    )
    with ServerThread(build_app(settings, runner)) as server:
        yield settings, runner, server.url.rstrip("/")
        runner.stop(save=False)
        runner.wait(10)


def logged_in(url: str) -> httpx.Client:
    """An HTTP client holding a UI login session (Gradio's cookie)."""
    client = httpx.Client(base_url=url, timeout=60)
    assert client.post("/login", data={"username": USER, "password": PASSWORD}).status_code == 200
    return client


def api(url: str) -> httpx.Client:
    """An HTTP client sending the API token."""
    return httpx.Client(base_url=url, headers=AUTH, timeout=60)


def idle(runner) -> None:
    """Cancel whatever runs and wait for the job thread to end."""
    runner.stop(save=False)
    assert runner.wait(20)


def snapshot(folder: Path) -> dict[str, tuple[int, float]]:
    """Every file below ``folder`` with its size and modification time."""
    return {str(p): (p.stat().st_size, p.stat().st_mtime) for p in folder.rglob("*") if p.is_file()}


def assert_no_canary(folder: Path) -> None:
    """No file below ``folder`` (the run history included) holds the canary's text."""
    for path in folder.rglob("*"):
        if path.is_file() and not path.is_symlink():
            assert CANARY.encode() not in path.read_bytes(), path


def alpaca(datasets_dir: Path) -> str:
    """The shared Alpaca file (an allowed, valid dataset)."""
    return str(datasets_dir / "alpaca_en_demo.json")


@pytest.fixture(scope="session")
def ray_head() -> Iterator[str]:
    """The address of a local Ray head (``tests/support/ray_head.py``), one per test process; mark the
    tests that use it ``xdist_group("ray")`` so they share it."""
    from tests.support.ray_head import local_ray_head

    yield from local_ray_head(free_port())


@pytest.fixture(scope="session")
def ray_startup_report(ray_head, datasets_dir, tiny_model_dir) -> dict[str, Any]:
    """``bench/ray_startup.py`` on the test head with the reference settings (identity.json, 4 steps,
    batch 2 a process, max_seq_length 128, seed 7: ``REFERENCE_TRAIN``, the bench's own): one run of
    2 torchrun processes and one of 2 Ray Train workers through ``JobRunner``, each timed to its first
    step. Returns the report with ``printed``, the bench's summary line. Made once per test process
    (the tests that use it share the xdist group "ray")."""
    import contextlib
    import io

    from bench import ray_startup

    summary = io.StringIO()
    with contextlib.redirect_stderr(summary), contextlib.redirect_stdout(io.StringIO()):
        report = ray_startup.main(
            ["--steps", REFERENCE_TRAIN[1], "--repeats", "1", "--ray-address", ray_head,
             "--model", str(tiny_model_dir), "--dataset", str(datasets_dir / "identity.json")]
        )  # fmt: skip
    return {**report, "printed": summary.getvalue()}


@pytest.fixture(scope="session")
def torchrun_reference(ray_startup_report) -> list[float]:
    """The 4 logged losses of the tiny SmolLM2 trained in 2 torchrun processes with the reference
    settings (``ray_startup_report``'s torchrun run): what a Ray run and a run across machines with
    the same settings must reproduce."""
    (run,) = [r for r in ray_startup_report["runs"] if r["how"] == "torchrun"]
    return run["losses"]


# The CLI flags of the reference settings: those bench/ray_startup.py trains with (batch 2 a process,
# max_seq_length 128, seed 7) for 4 steps.
REFERENCE_TRAIN = ["--max-steps", "4", "--batch-size", "2", "--max-seq-length", "128", "--random-seed", "7"]
