"""A local Ray head for the ``compute: ray`` tests: ``ray start --head`` on 127.0.0.1 with 2 CPUs
(no dashboard), its address yielded, ``ray stop --force`` after. Used as the session fixture
``ray_head`` (tests/e2e/conftest.py); the tests that use it share the xdist group "ray", so one
head serves them all on one test process."""

from __future__ import annotations

import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

RAY = str(Path(sys.executable).with_name("ray")) if Path(sys.executable).with_name("ray").exists() else "ray"


def local_ray_head(port: int) -> Iterator[str]:
    """Start the head on ``port``, yield ``"127.0.0.1:<port>"``, stop it. Skips the test when the
    ``ray`` command is missing or the head does not start (the machine's matter, said in the skip)."""
    if shutil.which(RAY) is None and not Path(RAY).exists():
        pytest.skip("the ray command is not installed")
    start = [RAY, "start", "--head", "--node-ip-address", "127.0.0.1", "--port", str(port), "--num-cpus", "2"]
    started = subprocess.run(
        [*start, "--include-dashboard=false", "--disable-usage-stats"], capture_output=True, text=True
    )
    if started.returncode != 0:
        pytest.skip(f"a local Ray head did not start here: {started.stderr[-500:]}")
    try:
        yield f"127.0.0.1:{port}"
    finally:
        subprocess.run([RAY, "stop", "--force"], capture_output=True, timeout=120)
