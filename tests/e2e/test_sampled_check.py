"""The check of a 50,000-row file through the doors a user uses: the CLI prints the estimate from a
sample first ("estimated from N of M rows") and the exact report after it, the two within 5 %; the
API answers with the estimate and a full-pass id to poll, and a bad row deep in the file (row
45,000, not in the sample) is reported by its row when the exact check reaches it, and Start
refuses on it."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from tests.support.cli_here import cli_main
from trainer_core.data.row_sample import choose
from trainer_core.preflight.sampled import SAMPLE_FIRST

pytestmark = pytest.mark.slow
ROWS = 50_000
BAD_ROW = 45_000  # 1-based
SEED = 42
TOKEN = "sampled-check-token-0123456789"


def _write(path: Path, bad_row: int = 0) -> Path:
    """Alpaca rows of varied length (1-60 words of answer); ``bad_row``: a line that is not JSON."""
    with path.open("w") as handle:
        for i in range(ROWS):
            row = {"instruction": f"Question {i}?", "input": "", "output": "word " * ((i * 7919) % 60 + 1)}
            handle.write(('{"instruction": "cut off' if i + 1 == bad_row else json.dumps(row)) + "\n")
    return path


def test_cli_prints_the_estimate_first_then_the_exact_figures(tmp_path, capsys) -> None:
    data = _write(tmp_path / "big.jsonl")
    argv = ["check", "--dataset", str(data), "--max-seq-length", "128", "--json"]
    code = cli_main(
        argv, STUDIO_ALLOWED_PATHS=str(tmp_path), STUDIO_CHECK_SAMPLE_MB="1", STUDIO_DATA_DIR=str(tmp_path / "d")
    )
    first, exact = (json.loads(line) for line in capsys.readouterr().out.splitlines())
    assert code == 0
    assert first["estimate"]["basis"].startswith(f"estimated from 2,100 of {ROWS:,} rows")
    assert first["estimate"]["rows_total"] == exact["rows_read"] == ROWS
    assert exact["estimate"] is None and first["check_seconds"] < exact["check_seconds"]
    for field in ("total_steps", "tokens_trained", "tokens_total"):
        assert abs(first[field] - exact[field]) <= 0.05 * exact[field], field
        assert abs(first[field] - exact[field]) <= first["estimate"]["margins"][field] + 1, field


@pytest.fixture()
def client(tmp_path: Path):
    from fastapi.testclient import TestClient

    from server import build_app
    from trainer_core.admission.full_pass import full_worker
    from trainer_core.settings import Settings

    settings = Settings(data_dir=tmp_path / "studio", allowed_paths=str(tmp_path), api_token=TOKEN, check_sample_mb=1)
    with TestClient(build_app(settings)) as test_client:
        test_client.headers["Authorization"] = f"Bearer {TOKEN}"
        yield test_client
    full_worker().close()


def test_api_estimate_then_a_bad_row_deep_in_the_file_by_its_row(client, tmp_path) -> None:
    assert BAD_ROW - 1 not in set(choose(ROWS, SAMPLE_FIRST, 2000, SEED).tolist())  # only the full pass sees it
    data = _write(tmp_path / "deep.jsonl", bad_row=BAD_ROW)
    body = {"local_datasets": [str(data)], "max_seq_length": 128, "random_seed": SEED}
    answer = client.post("/api/train/preflight", json=body)
    assert answer.status_code == 200, answer.text
    first = answer.json()
    assert first["errors"] == [] and first["estimate"]["rows_total"] == ROWS
    pass_id = first["estimate"]["full_pass_id"]
    deadline = time.monotonic() + 240
    while (state := client.get(f"/api/train/preflight/{pass_id}").json())["state"] == "running":
        assert 0 <= state["progress"] < 1 and time.monotonic() < deadline
        time.sleep(0.5)
    assert state["state"] == "done", state
    errors = state["report"]["errors"]
    assert [e["code"] for e in errors] == ["data_error"] and f"row {BAD_ROW}" in errors[0]["message"]
    assert client.get("/api/train/preflight/nosuchpass").status_code == 404
    started = client.post("/api/train/start", json=body)
    assert started.status_code == 400 and f"row {BAD_ROW}" in started.text, started.text
