"""Trackers (``report_to``): the setting through every door (schema, form, CLI, YAML, command
preview), the SFTConfig mapping, the environment the worker sets (folders inside the run folder,
wandb offline without a network), Start's refusal of a tracker whose package is missing, and a real
run whose TensorBoard event file and trackio store hold the same losses as ``metrics.jsonl`` (slow)."""

from __future__ import annotations

import importlib.util
import json
import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest
from pydantic import ValidationError

from tests.conftest import train_to_completion
from trainer_core.runs.folders import MARKER
from trainer_core.schemas import TrainingStartRequest
from trainer_core.training import trackers

TRACKERS = ["tensorboard", "trackio", "wandb", "mlflow"]


def _request(**values) -> TrainingStartRequest:
    return TrainingStartRequest(local_datasets=["/x.json"], **values)


def _without(monkeypatch, *packages: str) -> None:
    """Make ``packages`` look uninstalled to ``find_spec`` (and everything else as it is)."""
    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, package=None: None if name in packages else real(name, package)
    )


# ----- the setting -----


def test_the_field_is_a_list_of_transformers_tracker_names_in_the_output_group():
    field = TrainingStartRequest.model_fields["report_to"]
    assert field.json_schema_extra == {"group": "output"} and field.title == "Report to (trackers)"
    assert all(name in field.description for name in TRACKERS)
    assert _request().report_to == []
    request = _request(report_to=["tensorboard", "trackio"])
    assert request.public_dict()["report_to"] == ["tensorboard", "trackio"]
    with pytest.raises(ValidationError, match="report_to"):
        _request(report_to=["comet_ml"])


def test_the_form_widget_is_a_multiselect_of_the_schema_choices():
    import gradio as gr

    from ui import form

    with gr.Blocks():
        widget = form.make_widget("report_to")
    assert isinstance(widget, gr.Dropdown) and widget.multiselect and widget.value == []
    assert [c[0] for c in widget.choices] == TRACKERS
    values = {name: form.default(name) for name in form.FORM_FIELDS} | {
        "hf_token": "",
        "custom_format_mapping": "",
        "report_to": ["trackio"],
    }
    assert form.build_request(values, ["train.json"], []).report_to == ["trackio"]


def test_cli_flag_yaml_and_command_preview(tmp_path):
    from trainer_core.cli import build_parser, request_from_args
    from trainer_core.configs.commands import cli_command
    from trainer_core.configs.yaml_files import parse_config_text, request_to_yaml

    data = tmp_path / "d.json"
    data.write_text("[]")
    args = build_parser().parse_args(["train", "--dataset", str(data), "--report-to", "tensorboard", "trackio"])
    request = request_from_args(args)
    assert request.report_to == ["tensorboard", "trackio"]
    with pytest.raises(SystemExit):
        build_parser().parse_args(["train", "--dataset", str(data), "--report-to", "comet_ml"])
    values, notes = parse_config_text(request_to_yaml(request.public_dict()))
    assert values["report_to"] == ["tensorboard", "trackio"] and not notes
    assert "--report-to tensorboard trackio" in cli_command(request.public_dict())
    assert "--report-to" not in cli_command(_request().public_dict())


def test_sft_config_reports_to_the_chosen_trackers_under_the_job_id(tmp_path):
    from trainer_core.training.config import build_sft_config

    args = build_sft_config(
        _request(report_to=["tensorboard", "trackio", "tensorboard"]), tmp_path, "cpu", False, run_name="job_x"
    )
    assert args.report_to == ["tensorboard", "trackio"] and args.run_name == "job_x"
    assert args.project == trackers.TRACKER_PROJECT and args.trackio_static_space_id is False
    assert build_sft_config(_request(), tmp_path, "cpu", False).report_to == []


# ----- the seed API's tracker fields -----


def test_the_seed_fields_map_onto_report_to_and_the_key_is_a_secret(tmp_path):
    from trainer_core.configs.commands import cli_command, curl_command
    from trainer_core.configs.yaml_files import parse_config_text, request_to_yaml

    assert _request(enable_tensorboard=True).report_to == ["tensorboard"]
    assert _request(tensorboard_dir=" logs/tb ").report_to == ["tensorboard"]
    assert _request(enable_wandb=True, report_to=["trackio"]).report_to == ["trackio", "wandb"]
    assert _request(wandb_project="my-proj.1").report_to == ["wandb"]
    assert _request(enable_tensorboard=False, enable_wandb=False, tensorboard_dir="", wandb_project=" ").report_to == []
    for fields, message in (
        (
            dict(enable_tensorboard=False, report_to=["tensorboard"]),
            "enable_tensorboard false disagrees with report_to",
        ),
        (dict(enable_wandb=False, wandb_token="k-123"), "enable_wandb false disagrees with wandb_token"),
        (dict(wandb_project="my project/x"), "is not a project name"),
    ):
        with pytest.raises(ValidationError, match=message):
            _request(**fields)
    request = _request(enable_wandb=True, wandb_project="p", wandb_token="wandb-key-123")
    public = request.public_dict()
    assert "wandb_token" not in public and public["report_to"] == ["wandb"] and public["wandb_project"] == "p"
    assert TrainingStartRequest(**public).report_to == ["wandb"]  # the stored request reads back alike
    text = request_to_yaml(request.model_dump(mode="json") | {"wandb_token": "wandb-key-123"})
    assert "wandb-key-123" not in text
    values, notes = parse_config_text(text + "\nwandb_token: wandb-key-123\n")
    assert "wandb_token" not in values and notes == [
        "wandb_token is not read from files: the server's own wandb login (WANDB_API_KEY) is used"
    ]
    settings = request.model_dump(mode="json") | {"wandb_token": "wandb-key-123"}
    assert "wandb-key-123" not in cli_command(settings) + curl_command(settings, "http://x", False)
    assert "wandb-key-123" not in repr(request) and "wandb-key-123" not in str(request.model_dump())


def test_the_worker_gets_the_seed_settings_and_the_key_in_its_environment_only(tmp_path, monkeypatch, caplog):
    import queue

    from trainer_core.training.failure_words import redact as _redact
    from trainer_core.training.worker import _prepare_trackers

    monkeypatch.setattr(os, "environ", {"WANDB_PROJECT": "server-default"})
    monkeypatch.setattr(trackers, "host_reachable", lambda host, port: True)
    request = _request(tensorboard_dir=str(tmp_path / "tb"), wandb_project="mine", wandb_token="wandb-key-123")
    with caplog.at_level(logging.DEBUG):
        _prepare_trackers(request, tmp_path / "run", queue.Queue())
    assert os.environ["TENSORBOARD_LOGGING_DIR"] == str(tmp_path / "tb")
    assert os.environ["WANDB_PROJECT"] == "mine" and os.environ["WANDB_API_KEY"] == "wandb-key-123"
    assert "wandb-key-123" not in caplog.text
    assert _redact("failed with wandb-key-123 in it", request) == "failed with *** in it"


# ----- the worker's environment -----


def test_every_tracker_writes_inside_the_run_folder(tmp_path):
    env, notices = trackers.tracker_env(TRACKERS, tmp_path, {}, reachable=lambda host, port: True)
    run = tmp_path.resolve()
    assert env == {
        "TENSORBOARD_LOGGING_DIR": str(run / "tensorboard"),
        "TRACKIO_DIR": str(run / "trackio"),
        "WANDB_DIR": str(run),
        "WANDB_PROJECT": trackers.TRACKER_PROJECT,
        "MLFLOW_TRACKING_URI": f"file:{run / 'mlruns'}",
    }
    assert notices == []
    assert trackers.tracker_env([], tmp_path, {}) == ({}, [])


def test_wandb_goes_offline_without_a_network_and_says_so(tmp_path):
    asked = []

    def unreachable(host, port):
        asked.append((host, port))
        return False

    env, notices = trackers.tracker_env(["wandb"], tmp_path, {}, reachable=unreachable)
    assert env["WANDB_MODE"] == "offline" and asked == [("api.wandb.ai", 443)]
    assert len(notices) == 1 and "api.wandb.ai cannot be reached" in notices[0] and "wandb sync" in notices[0]
    # the user's own settings win: no check at all with WANDB_MODE set; their server is the one checked
    env, notices = trackers.tracker_env(
        ["wandb"], tmp_path, {"WANDB_MODE": "online", "WANDB_PROJECT": "mine"}, reachable=unreachable
    )
    assert "WANDB_MODE" not in env and "WANDB_PROJECT" not in env and not notices and len(asked) == 1
    trackers.tracker_env(["wandb"], tmp_path, {"WANDB_BASE_URL": "http://wandb.local:8080"}, reachable=unreachable)
    assert asked[-1] == ("wandb.local", 8080)


def test_a_set_mlflow_uri_is_kept_and_secrets_are_never_logged(tmp_path, caplog):
    env = {"MLFLOW_TRACKING_URI": "http://mlflow:5000", "WANDB_API_KEY": "secret-key-123"}
    with caplog.at_level(logging.INFO, logger=trackers.__name__):
        notices = trackers.prepare_trackers(["mlflow", "wandb"], tmp_path, env, reachable=lambda host, port: False)
    assert env["MLFLOW_TRACKING_URI"] == "http://mlflow:5000" and env["WANDB_MODE"] == "offline"
    assert env["WANDB_API_KEY"] == "secret-key-123" and "secret-key-123" not in caplog.text
    assert notices and notices[0] in caplog.text  # the offline notice is in worker.log too


def test_the_worker_tells_the_user_that_wandb_is_offline(tmp_path, monkeypatch):
    import queue

    from trainer_core.training.worker import EventKind, _prepare_trackers

    monkeypatch.setattr(os, "environ", {})  # this test's environment only
    monkeypatch.setattr(trackers, "host_reachable", lambda host, port: False)
    events: queue.Queue = queue.Queue()
    notices = _prepare_trackers(_request(report_to=["wandb"]), tmp_path, events)
    kind, payload = events.get_nowait()
    assert kind == EventKind.INFO and payload["message"] == notices[0] and "offline" in notices[0]
    assert payload["details"] == {"tracker_notices": notices} and os.environ["WANDB_DIR"] == str(tmp_path.resolve())
    assert _prepare_trackers(_request(), tmp_path, events) == [] and events.empty()


# ----- a missing package is refused before the job starts -----


def test_a_missing_package_is_an_error_naming_the_pip_command(monkeypatch):
    from trainer_core.preflight import rules

    _without(monkeypatch, "wandb", "mlflow")
    issue = rules.trackers_missing(_request(report_to=["tensorboard", "wandb"]))
    assert issue.level == "error" and issue.code == "tracker_not_installed" and issue.fields == ["report_to"]
    assert issue.message == (
        "report_to: wandb is not installed on this server; install it with `pip install wandb`, "
        "or remove it from report_to"
    )
    both = rules.trackers_missing(_request(report_to=["mlflow", "wandb"])).message
    assert "mlflow and wandb are not installed" in both and "`pip install mlflow` and `pip install wandb`" in both
    assert rules.trackers_missing(_request(report_to=["tensorboard", "trackio"])) is None  # requirements-dev.txt


def test_start_and_the_check_refuse_a_missing_tracker_in_the_users_words(tmp_path, monkeypatch):
    from trainer_core.admission.admit import PreflightError, admit
    from trainer_core.preflight.check import run_preflight
    from trainer_core.settings import Settings
    from ui.refusals import describe

    _without(monkeypatch, "wandb")
    data = tmp_path / "a.json"
    data.write_text(json.dumps([{"instruction": "Say hi.", "input": "", "output": "Hi!"}] * 4))
    settings = Settings(data_dir=tmp_path / "data", allowed_paths=str(tmp_path))
    request = TrainingStartRequest(local_datasets=[str(data)], max_seq_length=64, report_to=["wandb"])
    with pytest.raises(PreflightError) as refused:
        admit(request, settings, None)
    assert [issue.code for issue in refused.value.issues] == ["tracker_not_installed"]
    assert "`pip install wandb`" in str(refused.value)
    assert [e.code for e in run_preflight(request, settings, estimates=False).errors] == ["tracker_not_installed"]
    shown = describe(refused.value)
    assert shown.fields == ("report_to",) and shown.text.startswith("Report to (trackers) (Output): wandb is not")
    admit(request.model_copy(update={"report_to": ["tensorboard"]}), settings, None)  # installed: admitted


# ----- a real run: what the trackers received (slow) -----


def _metrics_losses(run: Path) -> dict[int, float]:
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    return {row["step"]: row["loss"] for row in rows if row["loss"] is not None}


def _tensorboard_losses(folder: Path) -> dict[int, float]:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = EventAccumulator(str(folder))
    events.Reload()
    return {event.step: event.value for event in events.Scalars("train/loss")}


def _trackio_losses(folder: Path, run_name: str) -> dict[int, float]:
    """Read back through trackio's own storage API, in a child process (trackio reads TRACKIO_DIR at import)."""
    code = (
        "import json, sys; from trackio.sqlite_storage import SQLiteStorage; "
        f"print(json.dumps(SQLiteStorage.get_logs({trackers.TRACKER_PROJECT!r}, {run_name!r})))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        env={**os.environ, "TRACKIO_DIR": str(folder)},
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    ).stdout
    logs = json.loads(out.strip().splitlines()[-1])
    return {int(row["train/global_step"]): row["train/loss"] for row in logs if "train/loss" in row}


@pytest.mark.slow
def test_tensorboard_and_trackio_receive_the_losses_of_metrics_jsonl(tmp_path, tiny_model_dir, datasets_dir):
    before = {key: os.environ.get(key) for key in ("TENSORBOARD_LOGGING_DIR", "TRACKIO_DIR")}
    request = TrainingStartRequest(
        model_name=str(tiny_model_dir),
        local_datasets=[str(datasets_dir / "identity.json")],
        dataset_slice_end=16,
        batch_size=2,
        max_seq_length=64,
        max_steps=4,
        report_to=["trackio"],
        tensorboard_dir=str(tmp_path / "tb"),  # the seed API's folder: report_to gains tensorboard
    )
    _, job_id, run = train_to_completion(tmp_path / "runs", tmp_path / "studio.db", request)
    expected = _metrics_losses(run)
    assert sorted(expected) == [1, 2, 3, 4]
    event_files = list((tmp_path / "tb").glob("events.out.tfevents.*"))
    assert event_files and not (run / "tensorboard").exists()
    claimed = json.loads((tmp_path / "tb" / MARKER).read_text())  # the folder beside the run is the run's
    assert claimed == {"job_id": job_id, "files": sorted(p.name for p in event_files)}
    assert (run / "trackio" / f"{trackers.TRACKER_PROJECT}.db").is_file()
    for received in (_tensorboard_losses(tmp_path / "tb"), _trackio_losses(run / "trackio", job_id)):
        assert sorted(received) == sorted(expected)
        assert all(received[step] == pytest.approx(loss, rel=1e-6) for step, loss in expected.items())
    # set in the worker only: the app process's environment is as it was
    assert {key: os.environ.get(key) for key in before} == before
    manifest = json.loads((run / "run.json").read_text())
    assert manifest["request"]["report_to"] == ["trackio", "tensorboard"]
    assert manifest["sft_config"]["report_to"] == ["trackio", "tensorboard"]
