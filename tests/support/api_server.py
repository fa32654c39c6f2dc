"""``python app.py`` in a child process on a loopback port, for tests that kill and restart it; and
``api_app``, one such app shared by the HTTP tests that need no settings of their own (a pytest
plugin of ``tests/conftest.py``)."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Optional

import httpx
import psutil
import pytest

from trainer_core.process.context import worker_processes

REPO = Path(__file__).resolve().parents[2]


class AppProcess:
    """The real app as users start it, with ``env`` added to the environment."""

    def __init__(self, port: int, env: dict[str, str], log_path: Path) -> None:
        self.port, self.env, self.log_path = port, env, log_path
        self.url = f"http://127.0.0.1:{port}"
        self.process: Optional[subprocess.Popen] = None

    def start(self, timeout_s: float = 90) -> AppProcess:
        """Launch and wait until the API answers."""
        log = self.log_path.open("a")
        self.process = subprocess.Popen(
            [sys.executable, "app.py", "--port", str(self.port)],
            cwd=REPO,
            env={**os.environ, **self.env},
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            try:
                httpx.get(f"{self.url}/openapi.json", timeout=2)
                return self
            except httpx.HTTPError:
                assert self.process.poll() is None, self.log_path.read_text()[-3000:]
                time.sleep(0.3)
        raise TimeoutError(f"app did not start in {timeout_s} s")

    def workers(self) -> list[psutil.Process]:
        """The worker processes this app started (``process.context.worker_processes``)."""
        return [] if self.process is None else worker_processes(self.process.pid)

    def kill(self) -> None:
        """SIGKILL the app (no clean-up runs), as a crash or an OOM kill would."""
        if self.process and self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
            self.process.wait(10)

    def stop(self) -> None:
        """Terminate the app and wait for it."""
        if self.process and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(15)
            except subprocess.TimeoutExpired:
                self.kill()


def sse_events(client: httpx.Client, headers: dict[str, str], timeout_s: float = 300) -> Iterator[dict]:
    """Parse ``GET /api/train/progress`` into dicts {id, event, data, retry} as they arrive."""
    with client.stream("GET", "/api/train/progress", headers=headers, timeout=timeout_s) as response:
        assert response.status_code == 200 and response.headers["content-type"].startswith("text/event-stream")
        event: dict = {}
        for line in response.iter_lines():
            if not line:
                if event:
                    yield event
                event = {}
                continue
            key, _, value = line.partition(": ")
            event[key] = value


API_TOKEN = "test-api-app-token-3e8a"
API_AUTH = {"Authorization": f"Bearer {API_TOKEN}"}


@pytest.fixture(scope="session")
def api_app(tmp_path_factory, datasets_dir, tiny_model_dir, tiny_vl_dir, tiny_audio_chat_dir) -> Iterator[AppProcess]:
    """One launched app for the HTTP tests that need no settings of their own, so that it starts
    once (about 20 s with its standby worker's imports): token ``API_TOKEN``, reward code allowed
    (``STUDIO_ALLOW_REWARD_CODE``), allowed folders: the datasets, the tiny models' folders and
    ``api_app.files`` (each test module's own folder in it: ``app_for``); every other folder is
    outside. The tests that use it share the pytest-xdist group "api-app" (``tests/conftest.py``)
    and each waits for its run's end."""
    from tests.e2e.conftest import allowed, free_port

    folder = tmp_path_factory.mktemp("api-app")
    files = folder / "files"
    files.mkdir()
    models = (tiny_model_dir.parent, tiny_vl_dir.parent, tiny_audio_chat_dir.parent)
    env = {
        "STUDIO_DATA_DIR": str(folder / "data"),
        "STUDIO_ALLOWED_PATHS": allowed(datasets_dir, files, *models),
        "STUDIO_API_TOKEN": API_TOKEN,
        "STUDIO_ALLOW_REWARD_CODE": "1",
        "STUDIO_TOKEN_CACHE_MB": "64",  # on, in the app's own data dir (tests/conftest.py turns it off elsewhere)
    }
    proc = AppProcess(free_port(), env, folder / "app.log").start()
    proc.files = files
    yield proc
    proc.stop()


def app_for(api_app: AppProcess, name: str) -> SimpleNamespace:
    """A test module's view of ``api_app``: its ``url``, ``process`` and ``folder`` (``files /
    name``, made here: inside the allowed folders). A run an earlier module left going (a test that
    failed midway) is cancelled first, so that its failure stays its own."""
    api = httpx.Client(base_url=api_app.url, headers=API_AUTH, timeout=60)
    if api.get("/api/train/status").json()["is_training_running"]:
        api.post("/api/train/stop", json={"save": False})
        deadline = time.monotonic() + 60
        while api.get("/api/train/status").json()["is_training_running"] and time.monotonic() < deadline:
            time.sleep(0.2)
    folder = api_app.files / name
    folder.mkdir(exist_ok=True)
    return SimpleNamespace(url=api_app.url, process=api_app.process, folder=folder)


def app_with_media(api_app: AppProcess, name: str, media: str, canary: str, secret: Path) -> SimpleNamespace:
    """``app_for`` with ``data`` (inside the allowed folders) holding the demo media files of
    ``../shared/datasets/mllm_demo_data`` in ``data / media``, and ``secret`` (a folder outside every
    allowed folder, given) holding a file named ``canary`` with the canary text in it."""
    from tests.conftest import DATASETS
    from tests.e2e.conftest import CANARY

    app = app_for(api_app, name)
    app.data, app.secret = app.folder / "data-files", secret
    shutil.copytree(DATASETS / "mllm_demo_data", app.data / media)
    (secret / canary).write_text(CANARY)
    return app
