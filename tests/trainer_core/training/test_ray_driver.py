"""``compute: ray``'s settings and refusals without a cluster: the schema's rules (an address, ddp,
no local GPU ids; num_processes follows num_workers), Ray missing (the install command named), an
address where nothing answers, and a cluster without the resources the workers ask for; the files
of a ``ray_storage_path`` run (staged, fetched, copied back; the path check) and the TCP link that
workers on other machines would use."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from trainer_core.distributed import launch
from trainer_core.schemas import TrainingStartRequest
from trainer_core.training.ray_driver import missing_resources


def ray_request(**values) -> TrainingStartRequest:
    return TrainingStartRequest(
        **{"local_datasets": ["a.json"], "compute": "ray", "ray_address": "127.0.0.1:6379", **values}
    )


def test_a_ray_run_is_a_group_of_num_workers():
    request = ray_request(num_workers=3, resources_per_worker={"CPU": 2, "GPU": 0})
    assert request.num_processes == 3 and launch.uses_launcher(request)
    assert launch.launcher_command(request, "py") == ["py", "-m", "trainer_core.training.ray_driver"]
    assert launch.launcher_name(request) == "Ray Train"
    assert TrainingStartRequest(**request.public_dict()) == request  # a stored run replays


@pytest.mark.parametrize(
    "values, message",
    [
        ({"compute": "ray", "ray_address": None}, "compute ray needs ray_address"),
        ({"compute": "local"}, "ray_address and ray_storage_path are read only with compute ray"),
        ({"gpu_ids": "0"}, "clear gpu_ids"),
        ({"num_processes": 4, "num_workers": 2}, "with compute ray set num_workers"),
        ({"ray_address": "http://x"}, "ray_address"),
        ({"resources_per_worker": {"CPU": -1}}, "resources_per_worker"),
        ({"resources_per_worker": {"CPU": 0}}, "each worker must reserve something"),
        ({"resources_per_worker": {}}, "each worker must reserve something"),
        ({"resources_per_worker": {"": 1}}, "is not a Ray resource name"),
        ({"ray_address": "127.0.0.1:99999"}, "port from 1 to 65535"),
        ({"ray_address": "127.0.0.1:0"}, "port from 1 to 65535"),
        ({"ray_storage_path": "file:///etc"}, "neither a folder path nor a storage URI"),
        ({"ray_storage_path": "memory://x"}, "neither a folder path nor a storage URI"),
        ({"ray_storage_path": "s3://b/../../etc"}, "neither a folder path nor a storage URI"),
        ({"ray_storage_path": "s3://b/a?x;rm"}, "neither a folder path nor a storage URI"),
    ],
)
def test_ray_settings_that_cannot_run_name_the_field(values, message):
    with pytest.raises(ValidationError, match=message):
        TrainingStartRequest(**{"local_datasets": ["a.json"], "compute": "ray", "ray_address": "h:1", **values})


def test_without_ray_or_a_cluster_the_refusal_says_what_to_do(monkeypatch):
    from tests.e2e.conftest import free_port

    closed = ray_request(ray_address=f"127.0.0.1:{free_port()}")
    assert "nothing answers at 127.0.0.1:" in launch.ray_problem(closed, timeout_s=1)
    monkeypatch.setattr(launch, "find_spec", lambda name: None)
    assert 'pip install "finetune-studio[ray]"' in launch.machine_problem(closed, launch.Devices(2, 0))


def test_a_cluster_too_small_for_the_workers_is_named():
    settings = {"resources": {"CPU": 1.0}, "use_gpu": False, "workers": 3}
    assert "3 workers x 1 CPU need 3 CPU, and the cluster has 2" in missing_resources({"CPU": 2.0}, settings)
    assert missing_resources({"CPU": 4.0}, settings) is None
    gpus = {"resources": {"CPU": 1.0}, "use_gpu": True, "workers": 2}
    assert "need 2 GPU, and the cluster has 0" in missing_resources({"CPU": 8.0}, gpus)


# ----- files through ray_storage_path (distributed.ray_storage, training.ray_files) -----
def test_inputs_are_staged_fetched_and_the_results_copied_back(tmp_path):
    from trainer_core.distributed import ray_storage

    data, model, run = tmp_path / "d.json", tmp_path / "Model", tmp_path / "run"
    data.write_text("[]")
    (model / "sub").mkdir(parents=True)
    (model / "config.json").write_text("{}")
    (model / "sub" / "w.bin").write_bytes(b"\x01")
    run.mkdir()
    (run / "metrics.jsonl").write_text('{"step": 1}\n')
    request = ray_request(local_datasets=[str(data)], model_name=str(model))
    inputs = ray_storage.input_paths(request, run)
    assert inputs == {
        "local_datasets": [str(data)],
        "model_name": [str(model)],
        "metrics": [str(run / "metrics.jsonl")],
    }
    assert "model_name" not in ray_storage.input_paths(ray_request(model_name="HuggingFaceTB/SmolLM2-135M"), run)
    storage = tmp_path / "storage"
    ray_storage.open_staging(str(storage), "job1", "job_1")
    staged = ray_storage.stage_inputs(str(storage), "job1", inputs)
    assert staged["model_name"] == ["model_name/0/Model"] and staged["local_datasets"] == ["local_datasets/0/d.json"]
    local = ray_storage.fetch_inputs(str(storage), "job1", staged, tmp_path / "scratch")
    assert (Path(local["model_name"][0]) / "sub" / "w.bin").read_bytes() == b"\x01"
    assert Path(local["local_datasets"][0]).read_text() == "[]"

    for name, files in (("checkpoint-2", {"a.bin": "2", "metrics.jsonl": '{"step": 1}\n{"step": 2}\n'}),
                        ("checkpoint-4", {"a.bin": "4", "metrics.jsonl": "4 lines"})):  # fmt: skip
        (storage / "job1" / name).mkdir(parents=True)
        for file, text in files.items():
            (storage / "job1" / name / file).write_text(text)
    (run / "checkpoint-2").mkdir()  # already here: kept as it is
    assert ray_storage.fetch_outputs(str(storage), "job1", run, "job_1") == ["checkpoint-4"]
    assert (run / "checkpoint-4" / "a.bin").read_text() == "4" and not (run / "checkpoint-2" / "a.bin").exists()
    assert (run / "metrics.jsonl").read_text() == "4 lines"  # no final folder: the newest checkpoint's metrics
    (storage / "job1" / "final").mkdir()
    (storage / "job1" / "final" / "adapter_model.safetensors").write_text("w")
    (storage / "job1" / "final" / "metrics.jsonl").write_text("all")
    assert ray_storage.fetch_outputs(str(storage), "job1", run, "job_1") == ["final"]
    assert (run / "adapter_model.safetensors").read_text() == "w" and (run / "metrics.jsonl").read_text() == "all"
    assert ray_storage.fetch_outputs(str(storage), "nothing-here", run, "job_1") == []
    assert ray_storage.fetch_outputs(str(storage), "job1", run, "job_other") == []  # not that run's folder
    assert ray_storage.remove_run(str(storage), "job1", "job_1")
    assert not (storage / "job1").exists() and storage.is_dir()


def test_a_ray_run_stages_in_a_folder_of_its_own_and_deletes_only_that(tmp_path, capsys):
    """With ray_storage_path <data dir>/runs and output_dir <allowed>/<another run's job id>
    (or a user's folder of the same name in the storage) a run deleted that folder. The staging
    folder is named from the job id, made only where nothing is, marked, and only it is deleted."""
    import json

    from trainer_core.distributed import ray_storage
    from trainer_core.training.ray_driver import bring_back, stage

    storage = tmp_path / "runs"  # the data dir's runs/, another run's folder in it
    (storage / "job_a" / "checkpoint-1").mkdir(parents=True)
    (storage / "job_a" / "checkpoint-1" / "adapter_model.safetensors").write_text("job_a's")
    (storage / "decoyrun" / "sub").mkdir(parents=True)  # a user's folder named like the run folder
    (storage / "decoyrun" / "sub" / "notes.txt").write_text("the user's")
    before = sorted(str(p) for p in storage.rglob("*"))
    env = launch.launcher_env(ray_request(ray_storage_path=str(storage)), "/tmp/sock", b"k", launch.Devices(2, 0),
                              tmp_path / "allowed" / "job_a", "job_b")  # fmt: skip
    settings = json.loads(env[launch.RAY_ENV])
    name = settings["name"]
    assert name.startswith("studio-job_b-") and settings["job_id"] == "job_b" and "job_a" not in name
    assert ray_storage.staging_name("job_b") != name  # a new folder for each launch (a Resume too)
    data = tmp_path / "d.json"
    data.write_text("[]")
    files = {"storage": str(storage), "inputs": {"local_datasets": [str(data)]}, "run_folder": str(tmp_path / "run")}
    for taken in ("job_a", "decoyrun"):  # a folder that exists is never taken over
        assert stage(files, taken, "job_b") is None
        assert f"ray_storage_path: {storage}/{taken} already exists" in capsys.readouterr().err
    assert stage(files, name, "job_b") == {"local_datasets": ["local_datasets/0/d.json"]}
    assert json.loads((storage / name / ray_storage.OWNER).read_text()) == {"job_id": "job_b"}
    for foreign, job in (("job_a", "job_a"), ("decoyrun", "job_b"), (name, "job_c"), ("..", "job_b"), ("", "job_b")):
        assert not ray_storage.remove_run(str(storage), foreign, job)  # no marker, or another run's
    assert bring_back({**files, "run_folder": str(tmp_path / "run")}, "decoyrun", "job_b") == 0
    assert "left" in capsys.readouterr().err and (storage / "decoyrun" / "sub" / "notes.txt").is_file()
    assert bring_back(files, name, "job_b") == 0
    assert sorted(str(p) for p in storage.rglob("*")) == before  # the run's folder gone, every other one kept
    assert (storage / "decoyrun" / "sub" / "notes.txt").read_text() == "the user's"


def test_a_worker_localizes_the_request_and_says_the_run_folder(tmp_path):
    from trainer_core.distributed import ray_storage
    from trainer_core.training.ray_files import Relabelled, localize, remove_scratch

    data = tmp_path / "d.json"
    data.write_text("[]")
    request = ray_request(local_datasets=[str(data)], ray_storage_path=str(tmp_path / "s"))
    staged = ray_storage.stage_inputs(str(tmp_path / "s"), "job", ray_storage.input_paths(request, tmp_path / "run"))
    local, out = localize(request, {"storage": str(tmp_path / "s"), "name": "job", "inputs": staged})
    assert local.local_datasets != request.local_datasets and Path(local.local_datasets[0]).read_text() == "[]"
    assert local.ray_storage_path == request.ray_storage_path and out.is_dir() and out.name == "out"

    class Sink:
        def __init__(self):
            self.got = []

        def put(self, event):
            self.got.append(event)

    sink = Sink()
    said = Relabelled(sink, out, "/runs/job")
    said.put(("done", {"message": f"Training completed; output in {out}", "output_dir": str(out), "phase": "x"}))
    assert sink.got == [("done", {"message": "Training completed; output in /runs/job", "output_dir": "/runs/job",
                                  "phase": "x"})]  # fmt: skip
    remove_scratch(out)
    assert not out.parent.exists()


def test_a_storage_uri_passes_the_path_check_and_a_folder_is_confined(tmp_path):
    from trainer_core.admission.request_paths import checked_request
    from trainer_core.paths import PathNotAllowed

    data = tmp_path / "d.json"
    data.write_text("[]")
    uri = checked_request(ray_request(local_datasets=[str(data)], ray_storage_path="s3://bucket/runs"), [tmp_path])
    assert uri.ray_storage_path == "s3://bucket/runs"
    inside = checked_request(ray_request(local_datasets=[str(data)], ray_storage_path=str(tmp_path / "s")), [tmp_path])
    assert inside.ray_storage_path == str((tmp_path / "s").resolve())
    with pytest.raises(PathNotAllowed, match="ray_storage_path"):
        checked_request(ray_request(local_datasets=[str(data)], ray_storage_path="/etc"), [tmp_path])
    with pytest.raises(PathNotAllowed, match="ray_storage_path: d.json is a file: give a folder"):
        checked_request(ray_request(local_datasets=[str(data)], ray_storage_path=str(data)), [tmp_path])


# ----- the link to workers on other machines -----
def test_workers_on_other_machines_reach_the_job_over_tcp_with_the_key(monkeypatch, tmp_path):
    from multiprocessing import AuthenticationError
    from multiprocessing.connection import Client

    from trainer_core.distributed import group, launch

    assert launch.link_endpoint(ray_request()) is None  # a head on the loopback: a Unix socket
    assert launch.link_endpoint(TrainingStartRequest(local_datasets=["a.json"])) is None
    assert launch.link_family("/tmp/pymp-x/listener-1") == ("/tmp/pymp-x/listener-1", "AF_UNIX")
    assert launch.link_family("10.0.0.2:41234") == (("10.0.0.2", 41234), "AF_INET")
    monkeypatch.setattr(group, "link_endpoint", lambda request: "127.0.0.1")  # as for a head on another host
    ranks = group.RankGroup(ray_request(ray_address="10.9.9.9:6379"), "job", tmp_path)
    host, port = ranks._listener.address
    where, family = launch.link_family(f"{host}:{port}")
    accepted = []
    import threading

    threading.Thread(target=lambda: accepted.append(ranks._listener.accept()), daemon=True).start()
    conn = Client(where, family=family, authkey=ranks._key)
    conn.send(("hello", {"rank": 0}))
    conn.close()
    threading.Thread(target=lambda: _try_accept(ranks._listener), daemon=True).start()
    with pytest.raises((AuthenticationError, EOFError, ConnectionError)):
        Client(where, family=family, authkey=b"not the key")
    ranks._close()


def _try_accept(listener) -> None:
    try:
        listener.accept()
    except Exception:  # noqa: BLE001 - the wrong key is refused here too
        pass
