"""Processes end cleanly: a stopped app leaves no "leaked semaphore" warning, no traceback and no
process behind (multiprocessing's resource tracker prints the warning when a process ends without
unlinking the semaphores of its queues and events). CLI training runs are checked for the same where
they run anyway: two in a row in ``tests/trainer_core/cli/test_train_from_run.py`` (the rerun), one
in ``tests/trainer_core/data/test_prepare_shapes.py``."""

from __future__ import annotations

import signal
import time

import httpx
import psutil
import pytest

from tests.e2e.conftest import free_port, wait_for
from tests.support.api_server import AppProcess


@pytest.mark.slow
def test_stopped_app_asks_its_workers_to_end_and_leaks_nothing(tmp_path):
    """SIGTERM (what a Space, systemd or `docker stop` sends) while a standby worker waits: the app
    exits through a normal shutdown, its worker with it, and nothing is reported as leaked."""
    log = tmp_path / "app.log"
    app = AppProcess(free_port(), {"STUDIO_DATA_DIR": str(tmp_path / "data"), "PYTHONWARNINGS": "default"}, log)
    app.start()
    try:
        wait_for(lambda: httpx.post(f"{app.url}/api/train/prewarm", timeout=10).json()["ready"], 120, "standby")
        workers = app.workers()
        assert workers, "the prewarm started no standby worker"
        app.process.send_signal(signal.SIGTERM)
        assert app.process.wait(30) == 128 + signal.SIGTERM
        time.sleep(1.0)  # the resource tracker reports after its last user has gone
        gone, alive = psutil.wait_procs(workers, timeout=10)
        assert not alive, alive
    finally:
        app.kill()
    text = log.read_text()
    assert "leaked semaphore" not in text and "Traceback" not in text, text[-3000:]
