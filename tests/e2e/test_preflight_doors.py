"""The pre-flight check's doors tried as an attacker would, on the whole app with login and token (fake
stepping worker): ``POST /api/train/preflight``, the page's ``check`` event and the Runs tab's
``download_run`` event. Nothing outside the allowed folders is read or reported, no secret comes
back, and the happy path returns what it should."""

from __future__ import annotations

import io
import json
import os
import re
import threading
import time
import zipfile

import psutil
import pytest

from tests.e2e.conftest import CANARY, alpaca, api, assert_no_canary, form_args, idle, logged_in, snapshot, wait_for
from tests.support.raw_gradio import RawGradio, error_text, file_value

HF_TOKEN = "hf_PreflightSecretNeverEchoed9"


def test_preflight_route_reports_and_refuses_paths_outside(studio, outside, datasets_dir):
    settings, runner, url = studio
    client = api(url)
    before = snapshot(outside)
    body = {"local_datasets": [alpaca(datasets_dir)], "max_seq_length": 128, "num_epochs": 1, "hf_token": HF_TOKEN}
    answer = client.post("/api/train/preflight", json=body)
    assert answer.status_code == 200, answer.text
    report = answer.json()
    assert HF_TOKEN not in answer.text
    assert report["rows_read"] == 999 and report["files"][0]["format"] == "alpaca"
    assert (
        report["rows_truncated"] > 50
        and report["tokens_cut"] > 0
        and report["total_steps"] == report["steps_per_epoch"]
    )
    assert {"memory_estimate_gib", "time_estimate_seconds", "warnings", "errors", "rows_without_trained_tokens"} <= set(
        report
    )
    assert any(w["code"] == "rows_truncated" for w in report["warnings"]) and report["errors"] == []
    assert not runner.status().is_training_running  # nothing started
    for path in (str(outside / "canary.jsonl"), f"{datasets_dir}/../{outside.name}/canary.json", "/etc/passwd"):
        refused = client.post("/api/train/preflight", json={"local_datasets": [path]})
        assert refused.status_code == 400 and CANARY not in refused.text, refused.text
    refused = client.post(
        "/api/train/preflight", json={"local_datasets": [alpaca(datasets_dir)], "model_name": str(outside / "model")}
    )
    assert CANARY not in refused.text
    assert httpx_status(url, "/api/train/preflight", body) == 401  # no token: no report
    assert snapshot(outside) == before
    assert_no_canary(settings.data_dir)


def httpx_status(url: str, path: str, body: dict) -> int:
    import httpx

    return httpx.post(url + path, json=body, timeout=30).status_code


def test_check_event_refuses_foreign_files_and_reports_the_form(studio, outside, datasets_dir):
    settings, runner, url = studio
    raw = RawGradio(logged_in(url))
    check = raw.fn_index("check")
    for target in (outside / "canary.jsonl", settings.uploads_dir / ".." / ".." / "x.json"):
        answer = raw.call(check, [file_value(str(target)), *form_args("")[1:]])
        assert CANARY not in json.dumps(answer) and "not uploaded" in json.dumps(answer), answer  # Gradio's or ours
    typed = raw.call(check, form_args(str(outside / "canary.jsonl")))
    assert CANARY not in json.dumps(typed) and "Not checked" in typed["output"]["data"][3]
    good = raw.call(check, form_args(alpaca(datasets_dir), hf_token=HF_TOKEN, max_steps=5))
    assert good["success"], error_text(good)
    panel, report, figure, notice = good["output"]["data"]
    assert notice == "" and "999</strong> training rows kept of 999 read" in report and HF_TOKEN not in json.dumps(good)
    assert "5 steps" in report and json.loads(figure["plot"])["data"][0]["type"] == "bar"


def test_download_run_gives_run_json_and_weights_only_for_runs(studio, outside, datasets_dir):
    settings, runner, url = studio
    idle(runner)
    job = (
        api(url)
        .post("/api/train/start", json={"local_datasets": [alpaca(datasets_dir)], "max_steps": 3, "hf_token": HF_TOKEN})
        .json()
    )
    assert job["status"] == "queued", job
    wait_for(lambda: not runner.status().is_training_running, 30, "the fake run")
    folder = settings.runs_dir / job["job_id"]
    (folder / "adapter_model.safetensors").write_bytes(b"weights")
    (folder / "checkpoint-2").mkdir()
    (folder / "checkpoint-2" / "optimizer.pt").write_bytes(b"state")
    client = logged_in(url)
    raw = RawGradio(client)
    download = raw.fn_index("download_run")
    answer = raw.call(download, [job["job_id"]])
    assert answer["success"], error_text(answer)
    bundle, notice = answer["output"]["data"]
    assert notice == ""
    fetched = client.get(f"/gradio_api/file={bundle['value']['path']}")
    archive = zipfile.ZipFile(io.BytesIO(fetched.content))
    names = archive.namelist()
    assert names[0] == "run.json" and "adapter_model.safetensors" in names  # (the fake worker logs no metrics.jsonl)
    assert not any(n.startswith("checkpoint") for n in names) and "worker.log" not in names
    record = json.loads(archive.read("run.json"))
    assert record["request"]["max_steps"] == 3 and HF_TOKEN not in fetched.text
    # a run recorded with a folder outside the allowed ones, and ids that name no run
    runner.store.create_run("job_outside", {"max_steps": 1}, str(outside), "completed")
    for job_id in ("job_outside", "../../etc", "", "x" * 5000):
        refused = raw.call(download, [job_id])
        assert refused["success"] and "Not downloaded" in refused["output"]["data"][1], (job_id, refused)
        assert CANARY not in json.dumps(refused)
    runner.store.delete_run("job_outside")
    # run.json swapped for a link to a file outside the run folder: no zip, and nothing of the file
    (folder / "run.json").unlink()
    (folder / "run.json").symlink_to(outside / "canary.json")
    linked = raw.call(download, [job["job_id"]])
    assert linked["success"] and "is a link" in linked["output"]["data"][1], linked
    assert CANARY not in json.dumps(linked)
    (folder / "run.json").unlink()
    (folder / "tokenizer.json").symlink_to(outside / "canary.jsonl")  # another file as a link: left out
    (folder / "run.json").write_text(json.dumps(record))
    answer = raw.call(download, [job["job_id"]])
    fetched = client.get(f"/gradio_api/file={answer['output']['data'][0]['value']['path']}")
    assert "tokenizer.json" not in zipfile.ZipFile(io.BytesIO(fetched.content)).namelist()
    assert CANARY.encode() not in fetched.content


class RssPeak:
    """The largest resident memory (MB) of process ``pid``, sampled every 20 ms in a thread."""

    def __init__(self, pid: int) -> None:
        import psutil

        self.process, self.mb, self._done = psutil.Process(pid), 0.0, threading.Event()
        self.start_mb = self.process.memory_info().rss / 2**20
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()

    def _sample(self) -> None:
        while not self._done.is_set():
            self.mb = max(self.mb, self.process.memory_info().rss / 2**20)
            time.sleep(0.02)

    def stop(self) -> float:
        self._done.set()
        self._thread.join()
        return self.mb


@pytest.mark.slow
def test_a_100_mb_row_is_refused_by_row_in_the_check_worker_and_a_check_over_its_memory_is_ended(
    studio, datasets_dir, monkeypatch
):
    """a one-row Alpaca file whose ``output`` is 100 MB grew the app to
    17 GB in /preflight and the kernel killed it. Now the row is refused by file and row at
    /preflight (a report), read in the check's worker process while the app (this test process)
    stays put, and at /start (400; sent as JSON lines, refused by the line scan before it is
    parsed); and a check that outgrows the worker's memory limit is ended and answered at both,
    after which the next check runs in a fresh worker."""
    from trainer_core.admission.check_worker import checker

    settings, runner, url = studio
    folder = settings.data_dir / "big-rows"
    folder.mkdir(exist_ok=True)
    path, lines = folder / "identity.json", folder / "identity.jsonl"
    row = {"instruction": "Repeat.", "input": "", "output": "x" * (100 * 2**20)}
    path.write_text(json.dumps([row]))
    lines.write_text(json.dumps(row) + "\n")  # the same row as JSON lines: refused before it is parsed
    client, body = api(url), {"local_datasets": [str(path)]}
    said = (
        "identity.json, row 1: field 'output' is 104,857,600 characters, over the limit of 4,000,000 for one value: "
        "split or shorten it, or raise STUDIO_MAX_FIELD_CHARS"
    )
    app = RssPeak(os.getpid())
    report = client.post("/api/train/preflight", json=body, timeout=300)
    peak = app.stop()
    started = client.post("/api/train/start", json={"local_datasets": [str(lines)]}, timeout=300)
    print(f"app (test process) RSS {app.start_mb:.0f} MB before, peak {peak:.0f} MB while the worker read a 100 MB row")
    assert report.status_code == 200, report.text
    assert [(e["code"], e["message"]) for e in report.json()["errors"]] == [("data_error", said)]
    assert report.json()["no_estimates"] == "the data could not be checked (see the error)"
    assert peak - app.start_mb < 300 and not runner.status().is_training_running
    assert started.status_code == 400, started.text
    assert started.json()["detail"].startswith(
        "identity.jsonl, line 1 (row 1): the line is longer than 48,000,000 bytes"
    )

    monkeypatch.setenv("STUDIO_MAX_FIELD_CHARS", str(10**9))  # the row allowed: its reading outgrows the worker
    monkeypatch.setenv("STUDIO_MAX_ROW_CHARS", str(10**9))
    assert client.post("/api/train/preflight", json={"local_datasets": [alpaca(datasets_dir)]}).status_code == 200
    worker = checker().pid
    limit = int(psutil.Process(worker).memory_info().rss / 2**20) + 300
    monkeypatch.setattr(settings, "check_memory_mb", limit)
    report = client.post("/api/train/preflight", json=body, timeout=300).json()
    started = client.post("/api/train/start", json=body, timeout=300)
    [error] = report["errors"]
    assert error["code"] == "check_out_of_memory" and report["rows_read"] == 0, report
    expected = rf"^the check was stopped: reading and tokenizing the data took its worker to [\d,]+ MB, over the limit of {limit:,} MB \(STUDIO_CHECK_MEMORY_MB\): split the data"
    assert re.match(expected, error["message"]) and started.status_code == 400
    assert started.json()["detail"].startswith("the check was stopped: ") and not psutil.pid_exists(worker)
    monkeypatch.undo()
    again = client.post("/api/train/preflight", json={"local_datasets": [alpaca(datasets_dir)]}).json()
    assert again["errors"] == [] and again["rows_read"] == 999 and checker().pid not in (None, worker)
