"""Where and how many processes train: processes and GPUs on this machine, torchrun across machines,
the distributed strategy (DDP, FSDP, DeepSpeed) and a Ray cluster's workers."""

from __future__ import annotations

import re
from typing import Any, Optional

from pydantic import Field, field_validator

from trainer_core.request.base import MAX_PATH_CHARS, FieldGroup, blank_is_none, in_section
from trainer_core.request.mappings import read_text
from trainer_core.vocabulary import Compute, Distributed, WholeNumber

HOST_PORT = re.compile(r"([A-Za-z0-9.\-]+|\[[0-9A-Fa-f:.]+\]):([0-9]{1,5})")  # host:port, [v6]:port
STORAGE_SCHEMES = ("s3", "gs", "gcs", "abfs", "abfss", "hdfs")  # filesystems pyarrow opens for Ray Train
STORAGE_URI = re.compile(rf"(?:{'|'.join(STORAGE_SCHEMES)})://[A-Za-z0-9._\-]+(?:/(?!\.\.(?:/|$))[A-Za-z0-9._\-]+)*/?")
RESOURCE_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.:\-]{0,63}")
GPU_IDS = re.compile(r"[ ]*[0-9]{1,3}([ ]*,[ ]*[0-9]{1,3}){0,63}[ ]*")  # e.g. "0,1" (CUDA_VISIBLE_DEVICES), ASCII only


class DeviceFields(FieldGroup):
    """The devices group's fields (section ``distributed``; the Ray settings carry ``compute: ray``)."""

    num_processes: WholeNumber = Field(
        1,
        ge=1,
        le=64,
        title="Processes (num_processes)",
        description="Training processes on this machine: 1 trains in one process; more train data-parallel (torchrun launches them; each process on its own GPU, or on its share of the CPU cores with the gloo backend). Every process takes batch_size rows per step, so a step trains batch_size x gradient_accumulation_steps x num_processes rows (the global batch).",
        json_schema_extra=in_section("distributed"),
    )
    gpu_ids: Optional[str] = Field(
        None,
        max_length=256,
        title="GPU ids",
        description="The GPUs to train on, e.g. 0,1 (CUDA_VISIBLE_DEVICES; one process per GPU); empty: the first num_processes GPUs, or the CPU on a machine without CUDA GPUs.",
        json_schema_extra=in_section("distributed"),
    )
    num_nodes: WholeNumber = Field(
        1,
        ge=1,
        le=64,
        title="Machines (num_nodes)",
        description="torchrun across machines: how many machines train together, each running the studio's CLI with the same settings and its own node_rank (num_processes processes on each). 1: this machine only.",
        json_schema_extra=in_section("distributed"),
    )
    node_rank: WholeNumber = Field(
        0,
        ge=0,
        le=63,
        title="This machine's number (node_rank)",
        description="num_nodes > 1: this machine's number, 0 to num_nodes - 1; machine 0 is the one at rdzv_endpoint, holds rank 0 and writes the adapter and checkpoints.",
        json_schema_extra=in_section("distributed"),
    )
    rdzv_endpoint: Optional[str] = Field(
        None,
        max_length=256,
        title="Rendezvous address (rdzv_endpoint)",
        description="num_nodes > 1: machine 0's address and a free port, host:port, the same on every machine (torchrun's --rdzv-endpoint; every machine must reach it).",
        json_schema_extra=in_section("distributed"),
    )
    distributed: Distributed = Field(
        "ddp",
        title="Distributed strategy",
        description="With several processes: ddp keeps a whole copy of the model in each (PyTorch DistributedDataParallel); fsdp shards it across GPUs as your accelerate config file says (accelerate launch); deepspeed shards it as your DeepSpeed JSON says (ZeRO). fsdp and deepspeed need CUDA GPUs and a config file.",
        json_schema_extra=in_section("distributed"),
    )
    compute: Compute = Field(
        "local",
        title="Compute",
        description='local: the processes run on this machine (num_processes); ray: on a Ray cluster through Ray Train\'s TorchTrainer (num_workers workers, each running the same training worker; needs ray installed: pip install "finetune-studio[ray]").',
        json_schema_extra=in_section("distributed"),
    )
    ray_address: Optional[str] = Field(
        None,
        max_length=256,
        title="Ray address",
        description="compute ray: the cluster to run on, host:port of its head (ray start --head prints it; 6379 by default) or ray://host:10001 (Ray Client).",
        json_schema_extra=in_section("distributed", compute="ray"),
    )
    num_workers: WholeNumber = Field(
        1,
        ge=1,
        le=256,
        title="Ray workers (num_workers)",
        description="compute ray: how many Ray Train workers train data-parallel (each takes batch_size rows per step, like a process of num_processes).",
        json_schema_extra=in_section("distributed", compute="ray"),
    )
    resources_per_worker: dict[str, float] = Field(
        default_factory=lambda: {"CPU": 1.0},
        max_length=8,
        title="Resources per worker",
        description="compute ray: what each worker reserves on the cluster, e.g. CPU=2, GPU=1 (Ray's resource names).",
        json_schema_extra=in_section("distributed", compute="ray"),
    )
    use_gpu: bool = Field(
        False,
        title="Ray workers use GPUs",
        description="compute ray: each worker gets a GPU (Ray Train's use_gpu; NCCL between them); off: CPUs and gloo.",
        json_schema_extra=in_section("distributed", compute="ray"),
    )
    ray_storage_path: Optional[str] = Field(
        None,
        max_length=MAX_PATH_CHARS,
        title="Ray storage path",
        description="compute ray, workers on other machines: a folder every node sees (NFS) or a URI such as s3://bucket/runs (Ray Train's storage_path). May be shared (and hold files), but not a studio folder or inside a run's folder. The studio copies the checked inputs into a new folder of the run's own there (studio-<job id>-<8 hex>), the workers train in a folder of their own and report checkpoints there, and the studio copies them into the run folder and deletes that folder only. Empty: the workers use the run folder directly (a cluster on this machine, or the data dir on a shared filesystem).",
        json_schema_extra=in_section("distributed", compute="ray"),
    )
    distributed_config: Optional[str] = Field(
        None,
        max_length=MAX_PATH_CHARS,
        title="Distributed config file",
        description="fsdp: an accelerate config YAML with distributed_type: FSDP (write one with `accelerate config`); deepspeed: a DeepSpeed JSON config. A file in an allowed folder.",
        json_schema_extra=in_section("distributed"),
    )

    @property
    def world_size(self) -> int:
        """How many processes train the run together: ``num_processes`` on each of ``num_nodes``
        machines (a Ray run's ``num_workers``: its num_processes)."""
        return self.num_processes * self.num_nodes

    @field_validator("distributed_config")
    @classmethod
    def _blank_config_file(cls, value: Optional[str]) -> Optional[str]:
        return blank_is_none(value)

    @field_validator("ray_address", "rdzv_endpoint")
    @classmethod
    def _host_and_port(cls, value: Optional[str], info: Any) -> Optional[str]:
        if value is None or not value.strip():
            return None
        value = value.strip()
        scheme = "ray://" if info.field_name == "ray_address" else ""
        match = HOST_PORT.fullmatch(value.removeprefix(scheme) if scheme else value)
        if match is None or not 1 <= int(match.group(2)) <= 65535:
            example = "10.0.0.1:6379 or ray://10.0.0.1:10001" if scheme else "10.0.0.1:29400"
            raise ValueError(f"'{value[:60]}' is not a host:port with a port from 1 to 65535, e.g. {example}")
        return value

    @field_validator("ray_storage_path")
    @classmethod
    def _storage_kind(cls, value: Optional[str]) -> Optional[str]:
        if value is None or not value.strip():
            return None
        value = value.strip()
        if "://" in value and not STORAGE_URI.fullmatch(value):
            raise ValueError(
                f"'{value[:60]}' is neither a folder path nor a storage URI the cluster shares: give a folder (a "
                f"local path, which must be in the allowed folders) or {', '.join(STORAGE_SCHEMES)}://bucket/path"
            )
        return value

    @field_validator("resources_per_worker", mode="before")
    @classmethod
    def _resources_text(cls, value: Any) -> Any:
        """The text forms (``a=b, c=d``, ``a -> b``, a JSON object) read as the form reads them."""
        return read_text(value, "resources_per_worker")

    @field_validator("resources_per_worker")
    @classmethod
    def _resource_names(cls, value: dict[str, float]) -> dict[str, float]:
        if not value or not any(amount > 0 for amount in value.values()):
            raise ValueError("each worker must reserve something, e.g. CPU=1 (or CPU=2, GPU=1)")
        for name in value:
            if not RESOURCE_NAME.fullmatch(name):
                raise ValueError(f"'{name[:40]}' is not a Ray resource name such as CPU, GPU or memory")
        return value

    @field_validator("gpu_ids")
    @classmethod
    def _gpu_numbers(cls, value: Optional[str]) -> Optional[str]:
        if not value or not value.strip():
            return None
        if not GPU_IDS.fullmatch(value):
            raise ValueError(f"'{value[:40]}' is not a list of GPU numbers such as 0,1 (see nvidia-smi)")
        return ",".join(part.strip() for part in value.split(","))
