"""``compute: ray``'s settings and refusals without a cluster: the schema's rules (an address, ddp,
no local GPU ids; num_processes follows num_workers), Ray missing (the install command named), an
address where nothing answers, and a cluster without the resources the workers ask for."""

from __future__ import annotations

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
        ({"compute": "local"}, "ray_address is read only with compute ray"),
        ({"gpu_ids": "0"}, "clear gpu_ids"),
        ({"num_processes": 4, "num_workers": 2}, "with compute ray set num_workers"),
        ({"ray_address": "http://x"}, "ray_address"),
        ({"resources_per_worker": {"CPU": -1}}, "resources_per_worker"),
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
