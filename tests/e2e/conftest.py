"""A real app on a loopback port (in this process, ``prevent_thread_lock``) and a gradio_client for it."""

from __future__ import annotations

import socket
import time
from typing import Any, Iterator

import pytest

from trainer_core.schemas import Phase
from trainer_core.fieldmeta import default
from ui.form import FORM_FIELDS


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="session")
def app_server(model_dir, tmp_path_factory):
    """(runner, url) of a launched app whose runs go to a temporary folder."""
    from app import build_app
    from trainer_core.job import JobRunner

    runner = JobRunner(runs_dir=tmp_path_factory.mktemp("runs"))
    demo = build_app(runner)
    port = _free_port()
    demo.launch(server_name="127.0.0.1", server_port=port, prevent_thread_lock=True, quiet=True)
    yield runner, f"http://127.0.0.1:{port}/"
    runner.stop(save=False)
    runner.wait(10)
    demo.close()


@pytest.fixture
def client(app_server):
    from gradio_client import Client

    runner, url = app_server
    runner.wait(60)  # the previous test's job has ended
    return Client(url, verbose=False)


def form_args(dataset: str, **overrides: Any) -> list[Any]:
    """Positional inputs of the ``/start`` endpoint, as the page would send them."""
    values = {name: default(name) for name in FORM_FIELDS}
    values.update(hf_token="", custom_format_mapping="", hf_dataset="", subset="", eval_split="",
                  output_dir="", resume_from_checkpoint="", dataset_slice_end=None)
    values.update(overrides)
    return [None, dataset, "", *(values[name] for name in FORM_FIELDS)]


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
