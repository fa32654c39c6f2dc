"""How a run with ``num_processes`` > 1 (or chosen ``gpu_ids``) is launched, and whether it can be.

- ``ddp`` and ``deepspeed``: ``python -m torch.distributed.run --standalone --nnodes 1
  --nproc-per-node N -m trainer_core.training.rank_main`` (torchrun; a DeepSpeed JSON is handed to
  transformers as ``TrainingArguments.deepspeed``, the way transformers documents it for torchrun).
  Across machines (``num_nodes`` > 1, the studio's CLI run on each): ``--nnodes M --node-rank R
  --rdzv-endpoint HOST:PORT`` instead of ``--standalone`` (torchrun's static rendezvous, hosted by
  machine 0 at that address; https://pytorch.org/docs/stable/elastic/run.html).
- ``fsdp``: ``python -m accelerate.commands.launch --config_file <yaml> --num_processes N ...``
  (accelerate launch reads the FSDP settings from the user's accelerate config and runs torchrun).

Both restart nothing (``max_restarts`` 0: a failed process ends the run) and check their processes
every 0.1 s. On CPU each process gets ``cores // N`` threads (``OMP_NUM_THREADS``) and transformers
picks the gloo backend; on GPUs, NCCL, and ``CUDA_VISIBLE_DEVICES`` is ``gpu_ids`` when given.
"""

from __future__ import annotations

import json
import os
import socket
import stat
import sys
from dataclasses import dataclass
from importlib.util import find_spec
from pathlib import Path
from typing import Optional

from trainer_core.refusals import Refusal
from trainer_core.schemas import TrainingStartRequest

RANK_MODULE = "trainer_core.training.rank_main"
RAY_DRIVER = "trainer_core.training.ray_driver"
RAY_ENV = "FINETUNE_STUDIO_RAY"  # the Ray run's settings for ray_driver (JSON)
RAY_FILES_ENV = "FINETUNE_STUDIO_RAY_FILES"  # a Ray worker's staged inputs (JSON; ray_storage_path runs)
ADDRESS_ENV, KEY_ENV = "FINETUNE_STUDIO_GROUP_ADDRESS", "FINETUNE_STUDIO_GROUP_KEY"
PROJECT_ROOT = Path(__file__).resolve().parents[2]
MAX_CONFIG_BYTES = 1_000_000


class ScalingError(Refusal):
    """A ``num_processes`` / ``gpu_ids`` / ``distributed`` setting this machine cannot run, or a
    ``distributed_config`` file that cannot be used; the message names the field and the fix."""

    code = "devices_unavailable"


def uses_launcher(request: TrainingStartRequest) -> bool:
    """True when the run goes through a launcher: several processes, or GPUs chosen by id (the ids
    must be set in the environment before CUDA starts, so a fresh launched process is used)."""
    return request.num_processes > 1 or bool(request.gpu_ids) or request.compute == "ray" or request.num_nodes > 1


def gpu_list(gpu_ids: Optional[str]) -> list[int]:
    """``"0, 2"`` -> ``[0, 2]`` (the schema has checked the digits-and-commas form)."""
    return [int(part) for part in (gpu_ids or "").split(",") if part.strip()]


@dataclass(frozen=True)
class Devices:
    """What the machine offers: ``cpu_count`` cores and ``gpu_count`` visible CUDA GPUs."""

    cpu_count: int
    gpu_count: int


def machine_devices() -> Devices:
    """This machine's cores (those this process may run on) and CUDA GPUs (the hardware panel's list:
    ``nvidia-smi``, or torch when something already imported it)."""
    from trainer_core.hardware import cached_snapshot

    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    return Devices(cores, len(cached_snapshot().gpus))


RAY_INSTALL = 'pip install "finetune-studio[ray]"'


def ray_problem(request: TrainingStartRequest, timeout_s: float = 3.0) -> Optional[str]:
    """Why a ``compute: ray`` run cannot start from here (``ray_refusal``'s message), or None."""
    refusal = ray_refusal(request, timeout_s)
    return str(refusal) if refusal else None


def ray_refusal(request: TrainingStartRequest, timeout_s: float = 3.0) -> Optional[ScalingError]:
    """Why a ``compute: ray`` run cannot start from here: Ray not installed (naming the command), or
    nothing answering at ``ray_address`` (one TCP connection, no Ray call); None when it can try.
    Whether the cluster has the resources asked for is checked by the launcher
    (``ray_driver``), which ends the run with the reason instead of waiting for them."""
    if find_spec("ray") is None:
        return ScalingError(
            f"compute: ray needs Ray on this server: {RAY_INSTALL} (or choose compute local)", fields=("compute",)
        )
    host, _, port = str(request.ray_address).removeprefix("ray://").rpartition(":")
    try:
        with socket.create_connection((host.strip("[]"), int(port)), timeout=timeout_s):
            return None
    except (OSError, ValueError) as exc:
        return ScalingError(
            f"ray_address: nothing answers at {request.ray_address} ({getattr(exc, 'strerror', None) or exc}); start "
            "the cluster's head there (ray start --head --port PORT) or give the address it printed",
            fields=("ray_address",),
        )


def machine_problem(request: TrainingStartRequest, devices: Devices) -> Optional[str]:
    """Why ``devices`` cannot run ``request``'s processes (``machine_refusal``'s message), or None."""
    refusal = machine_refusal(request, devices)
    return str(refusal) if refusal else None


def machine_refusal(request: TrainingStartRequest, devices: Devices) -> Optional[ScalingError]:
    """Why ``devices`` cannot run ``request``'s processes, naming the field and the fix; None when
    they can. A Ray run's processes run on the cluster: ``ray_refusal``."""
    if request.compute == "ray":
        return ray_refusal(request)
    n, gpus = request.num_processes, gpu_list(request.gpu_ids)
    if gpus and devices.gpu_count == 0:
        return ScalingError(
            "gpu_ids: this machine has no CUDA GPU; leave GPU ids empty to train on the CPU", fields=("gpu_ids",)
        )
    if gpus:
        missing = [g for g in gpus if g >= devices.gpu_count]
        if missing:
            return ScalingError(
                f"gpu_ids: GPU {missing[0]} does not exist; this machine has {devices.gpu_count} GPU(s), "
                f"numbered 0 to {devices.gpu_count - 1}",
                fields=("gpu_ids",),
            )
        if len(set(gpus)) != len(gpus):
            return ScalingError("gpu_ids: a GPU is listed twice; list each GPU once", fields=("gpu_ids",))
        if n > len(gpus):
            return ScalingError(
                f"num_processes ({n}) is more than the {len(gpus)} GPU(s) in gpu_ids: one process per GPU; "
                f"list more GPUs or lower num_processes",
                fields=("num_processes", "gpu_ids"),
            )
    elif devices.gpu_count and n > devices.gpu_count:
        return ScalingError(
            f"num_processes ({n}) is more than the {devices.gpu_count} GPU(s) of this machine: one process per GPU",
            fields=("num_processes",),
        )
    elif not devices.gpu_count and n > devices.cpu_count:
        return ScalingError(
            f"num_processes ({n}) is more than the {devices.cpu_count} CPU core(s) of this machine: "
            f"each process needs at least one core; lower num_processes",
            fields=("num_processes",),
        )
    if request.distributed != "ddp" and not devices.gpu_count:
        return ScalingError(
            f"distributed: {request.distributed} shards the model across CUDA GPUs; this machine has none: choose ddp",
            fields=("distributed",),
        )
    if request.distributed == "deepspeed" and find_spec("deepspeed") is None:
        return ScalingError(
            "distributed: deepspeed is not installed on this server (pip install deepspeed): choose ddp or fsdp",
            fields=("distributed",),
        )
    return None


def check_config_file(request: TrainingStartRequest) -> None:
    """Read ``distributed_config`` (already confined to the allowed folders) and check that it is
    what ``distributed`` needs: for ``fsdp`` a YAML mapping with ``distributed_type: FSDP``
    (accelerate's config format), for ``deepspeed`` a JSON object (DeepSpeed's config format); only a
    regular file of at most MAX_CONFIG_BYTES is opened. It is not run here. Raises ScalingError
    naming the field, the file and the fix."""
    if request.distributed == "ddp" or not request.distributed_config:
        return
    path = Path(request.distributed_config)
    where, field = f"distributed_config: {path.name}", ("distributed_config",)
    try:
        if not stat.S_ISREG(path.stat().st_mode):  # a folder, a pipe or a device: never opened
            raise ScalingError(f"{where} is not a regular file: give your config file's path", fields=field)
        if path.stat().st_size > MAX_CONFIG_BYTES:
            raise ScalingError(
                f"{where} is over {MAX_CONFIG_BYTES // 1000} kB; a config file is a few lines", fields=field
            )
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ScalingError(
            f"{where} cannot be read ({getattr(exc, 'strerror', None) or exc}): choose a readable text file",
            fields=field,
        ) from None
    if request.distributed == "fsdp":
        import yaml

        try:
            config = yaml.safe_load(text)
        except (yaml.YAMLError, RecursionError) as exc:
            first = str(exc).splitlines()[0] if str(exc) else "nested too deeply"
            raise ScalingError(
                f"{where} is not valid YAML ({first[:200]}): save it with `accelerate config`", fields=field
            ) from None
        if not isinstance(config, dict) or str(config.get("distributed_type", "")).upper() != "FSDP":
            raise ScalingError(
                f"{where} is not an accelerate FSDP config (it needs distributed_type: FSDP): "
                "write one with `accelerate config`",
                fields=field,
            )
        return
    try:
        config = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ScalingError(
            f"{where} is not valid JSON (line {exc.lineno}: {exc.msg}): give a DeepSpeed JSON config", fields=field
        ) from None
    except RecursionError:
        raise ScalingError(f"{where} is not a DeepSpeed config (nested too deeply to read)", fields=field) from None
    if not isinstance(config, dict):
        raise ScalingError(
            f'{where} is not a DeepSpeed config (a JSON object such as {{"zero_optimization": {{...}}}})', fields=field
        )


LOOPBACK = ("localhost", "127.", "::1", "[::1]")


def link_endpoint(request: TrainingStartRequest) -> Optional[str]:
    """Where the job thread listens for a Ray run's workers when they may run on other machines: the
    address of this machine's interface that reaches the cluster's head (a TCP listener, port chosen
    by the system; ``multiprocessing.connection`` with the run's one-time key, whose challenge is
    answered before anything is unpickled). None for a local run or a head on this machine's
    loopback, whose workers reach the job thread over a Unix socket."""
    if request.compute != "ray" or not request.ray_address:
        return None
    host = str(request.ray_address).removeprefix("ray://").rpartition(":")[0].strip("[]")
    if host.startswith(LOOPBACK):
        return None
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
            probe.connect((host, 9))  # no packet is sent: the kernel picks the route and its source address
            return probe.getsockname()[0]
    except OSError:
        return None


def link_family(address: str) -> tuple[object, str]:
    """``(address, family)`` for ``multiprocessing.connection.Client`` from the text in ADDRESS_ENV:
    ``host:port`` over TCP, anything else a Unix socket path."""
    host, _, port = address.rpartition(":")
    if host and port.isdigit() and not address.startswith("/"):
        return (host, int(port)), "AF_INET"
    return address, "AF_UNIX"


def free_port() -> int:
    """A TCP port nobody listens on now, for accelerate's rendezvous (torchrun's ``--standalone`` picks its own)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def launcher_command(request: TrainingStartRequest, python: str = sys.executable) -> list[str]:
    """The command that starts ``request.num_processes`` processes of ``RANK_MODULE`` on this machine
    (or, for ``compute: ray``, as Ray Train workers on the cluster: ``ray_driver``)."""
    if request.compute == "ray":
        return [python, "-m", RAY_DRIVER]
    n = str(request.num_processes)
    if request.distributed == "fsdp":
        return [
            python,
            "-m",
            "accelerate.commands.launch",
            "--config_file",
            str(request.distributed_config),
            "--num_processes",
            n,
            "--num_machines",
            "1",
            "--main_process_port",
            str(free_port()),
            "--max_restarts",
            "0",
            "--monitor_interval",
            "0.1",
            "--module",
            RANK_MODULE,
        ]
    if request.num_nodes > 1:  # torchrun's static rendezvous: machine 0 hosts it at rdzv_endpoint
        where = ["--nnodes", str(request.num_nodes), "--node-rank", str(request.node_rank),
                 "--rdzv-endpoint", str(request.rdzv_endpoint)]  # fmt: skip
    else:
        where = ["--standalone", "--nnodes", "1"]
    return [
        python,
        "-m",
        "torch.distributed.run",
        *where,
        "--nproc-per-node",
        n,
        "--max-restarts",
        "0",
        "--monitor-interval",
        "0.1",
        "-m",
        RANK_MODULE,
    ]


def launcher_name(request: TrainingStartRequest) -> str:
    """``accelerate launch``, ``torchrun`` or ``Ray Train``: what ``launcher_command`` runs, for messages."""
    if request.compute == "ray":
        return "Ray Train"
    return "accelerate launch" if request.distributed == "fsdp" else "torchrun"


def launcher_env(
    request: TrainingStartRequest,
    address: str,
    key: bytes,
    devices: Devices,
    output_dir: Optional[Path] = None,
    job_id: str = "run",
) -> dict[str, str]:
    """The launched processes' environment: this one's, plus where to reach the job thread
    (``ADDRESS_ENV``, ``KEY_ENV``: read and removed by each process at start), the project on
    ``PYTHONPATH``, ``CUDA_VISIBLE_DEVICES`` from ``gpu_ids`` and, without GPUs, ``cores // N``
    threads per process (``OMP_NUM_THREADS``). A Ray run's settings name its Ray Train run (and
    staging folder in the storage) from ``job_id`` (``ray_storage.staging_name``), never from a
    user's folder name."""
    env = dict(os.environ)
    env[ADDRESS_ENV], env[KEY_ENV] = address, key.hex()
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(PROJECT_ROOT), env.get("PYTHONPATH", "")) if p)
    env["PYTHONUNBUFFERED"] = "1"
    if request.gpu_ids:
        env["CUDA_VISIBLE_DEVICES"] = ",".join(str(g) for g in gpu_list(request.gpu_ids))
    if not devices.gpu_count:
        env["OMP_NUM_THREADS"] = str(max(1, devices.cpu_count // request.num_processes))
    if request.compute == "ray":  # ray_driver's settings; the workers' threads follow their CPUs
        from trainer_core.distributed.ray_storage import staging_name

        cpus = int(request.resources_per_worker.get("CPU", 1) or 1)
        env[RAY_ENV] = json.dumps(
            {
                "address": request.ray_address,
                "workers": request.num_workers,
                "use_gpu": request.use_gpu,
                "resources": request.resources_per_worker,
                "storage": str(Path(output_dir) / "ray") if output_dir else None,
                "name": staging_name(job_id),
                "job_id": job_id,
                "threads": str(max(1, cpus)),
                "files": _storage_files(request, output_dir),
            }
        )
    return env


def _storage_files(request: TrainingStartRequest, output_dir: Optional[Path]) -> Optional[dict]:
    """With ``ray_storage_path``: the storage, the checked input paths (``ray_storage.input_paths``)
    and the run folder, for ``ray_driver``; None without it (the workers use the run folder)."""
    if not request.ray_storage_path or output_dir is None:
        return None
    from trainer_core.distributed.ray_storage import input_paths

    storage = request.ray_storage_path
    return {"storage": storage, "inputs": input_paths(request, Path(output_dir)), "run_folder": str(output_dir)}


__all__ = [
    "ScalingError",
    "check_config_file",
    "launcher_command",
    "launcher_env",
    "machine_devices",
    "machine_problem",
    "uses_launcher",
]
