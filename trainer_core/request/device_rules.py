"""The training request's cross-field rules about devices: a Ray cluster's settings, torchrun across
machines and the distributed strategy, one function each, in ``DEVICE_RULES``' order (``rules.RULES``
runs them after the method's and before LoRA's)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from trainer_core.refusals import Refusal

# A TrainingStartRequest (trainer_core.schemas composes it from the field groups, above this module)
Request = Any


def ray_settings_need_ray(request: Request) -> None:
    """ray_address and ray_storage_path are read with compute ray alone."""
    if request.compute != "ray" and (request.ray_address or request.ray_storage_path):
        raise Refusal(
            "ray_address and ray_storage_path are read only with compute ray: choose ray, or clear them",
            fields=("ray_address", "ray_storage_path", "compute"),
        )


def ray_needs_address(request: Request) -> None:
    """compute ray needs the cluster's address."""
    if request.compute == "ray" and not request.ray_address:
        raise Refusal(
            "compute ray needs ray_address: the head's host:port (ray start --head prints it) or ray://host:10001",
            fields=("compute", "ray_address"),
        )


def ray_counts_workers(request: Request) -> None:
    """With compute ray the group's size is num_workers: a num_processes given is 1 or the same."""
    if (
        request.compute == "ray"
        and "num_processes" in request.model_fields_set
        and request.num_processes not in (1, request.num_workers)
    ):
        raise Refusal(
            "num_processes counts this machine's processes; with compute ray set num_workers instead",
            fields=("num_processes", "num_workers"),
        )


def ray_places_ddp_workers(request: Request) -> None:
    """Ray places ddp workers itself: no local GPU ids, distributed ddp."""
    if request.compute == "ray" and (request.gpu_ids or request.distributed != "ddp"):
        raise Refusal(
            "compute ray runs ddp workers that Ray places (use_gpu and resources_per_worker choose their GPUs): "
            "clear gpu_ids and choose distributed ddp",
            fields=("use_gpu", "resources_per_worker", "gpu_ids", "distributed"),
        )


def ray_resources_not_negative(request: Request) -> None:
    """A Ray worker reserves 0 or more of each resource."""
    if request.compute == "ray" and any(value < 0 for value in request.resources_per_worker.values()):
        raise Refusal(
            "resources_per_worker: amounts must be 0 or more, e.g. CPU=2, GPU=1", fields=("resources_per_worker",)
        )


def ray_processes_are_workers(request: Request) -> None:
    """A Ray run's num_processes is its num_workers (the group's size everywhere: the global batch,
    the steps, the launcher)."""
    if request.compute == "ray":
        request.num_processes = request.num_workers


def one_machine_alone(request: Request) -> None:
    """On one machine there is no node_rank or rendezvous address."""
    if request.num_nodes == 1 and (request.node_rank or request.rdzv_endpoint):
        raise Refusal(
            "node_rank and rdzv_endpoint are read only with num_nodes > 1: set num_nodes, or clear them",
            fields=("node_rank", "rdzv_endpoint", "num_nodes"),
        )


def machines_need_rendezvous(request: Request) -> None:
    """num_nodes > 1 needs machine 0's rendezvous address."""
    if request.num_nodes > 1 and not request.rdzv_endpoint:
        raise Refusal(
            "num_nodes > 1 needs rdzv_endpoint: machine 0's host:port, the same on every machine",
            fields=("num_nodes", "rdzv_endpoint"),
        )


def node_rank_below_nodes(request: Request) -> None:
    """Machines are numbered 0 to num_nodes - 1."""
    if request.num_nodes > 1 and request.node_rank >= request.num_nodes:
        raise Refusal(
            f"node_rank {request.node_rank} is not below num_nodes {request.num_nodes}: number the machines 0 to "
            f"{request.num_nodes - 1}",
            fields=("node_rank", "num_nodes"),
        )


def machines_are_torchrun(request: Request) -> None:
    """num_nodes > 1 is torchrun on each machine: local compute (a Ray cluster places its workers
    itself), ddp or deepspeed (fsdp goes through accelerate launch on one machine)."""
    if request.num_nodes == 1:
        return
    if request.compute != "local":
        raise Refusal(
            "num_nodes counts torchrun's machines; a Ray cluster places its workers itself: set num_nodes 1 with "
            "compute ray",
            fields=("num_nodes", "compute"),
        )
    if request.distributed == "fsdp":
        raise Refusal(
            "num_nodes > 1 runs torchrun on each machine: choose ddp or deepspeed (fsdp goes through accelerate "
            "launch on one machine)",
            fields=("num_nodes", "distributed"),
        )


def sharding_needs_config(request: Request) -> None:
    """fsdp and deepspeed need several processes and their config file."""
    if request.distributed != "ddp" and not (request.distributed_config and request.num_processes > 1):
        raise Refusal(
            f"distributed {request.distributed!r} needs num_processes > 1 and distributed_config (your "
            f"{'accelerate FSDP YAML' if request.distributed == 'fsdp' else 'DeepSpeed JSON'}): set both, or "
            "choose ddp",
            fields=("distributed", "num_processes", "distributed_config"),
        )


def config_needs_sharding(request: Request) -> None:
    """distributed_config is read by fsdp and deepspeed alone."""
    if request.distributed_config and request.distributed == "ddp":
        raise Refusal(
            "distributed_config is read only with distributed fsdp or deepspeed: choose one, or clear the file",
            fields=("distributed_config", "distributed"),
        )


DEVICE_RULES: tuple[Callable[[Request], None], ...] = (
    ray_settings_need_ray,
    ray_needs_address,
    ray_counts_workers,
    ray_places_ddp_workers,
    ray_resources_not_negative,
    ray_processes_are_workers,
    one_machine_alone,
    machines_need_rendezvous,
    node_rank_below_nodes,
    machines_are_torchrun,
    sharding_needs_config,
    config_needs_sharding,
)
