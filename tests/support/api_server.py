"""``python app.py`` in a child process on a loopback port, for tests that kill and restart it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Optional

import httpx
import psutil

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
