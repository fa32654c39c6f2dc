"""The launcher of a ``compute: ray`` run (``python -m trainer_core.training.ray_driver``): it
plays torchrun's part for ``group.RankGroup``. It connects to the Ray cluster at ``ray_address``
and runs a Ray Train ``TorchTrainer`` whose workers each run ``training.rank_main`` (the same
training worker as a local run), handed the job thread's address and key in their loop config
instead of the environment (Ray starts its workers itself). Ray Train sets up the torch process
group (gloo on CPUs, NCCL on GPUs) and ``RANK`` / ``WORLD_SIZE`` / ``LOCAL_RANK`` before the loop
runs, as torchrun would.

Its settings arrive in ``RAY_ENV`` (JSON: address, workers, resources, use_gpu, storage path, run
name and job id; with ``ray_storage_path``, ``files``: the checked input paths and the run folder).
Then it makes the run's own staging folder in that storage (named from the job id, only when
nothing is there, marked as the run's), stages the inputs there before the workers start and copies
the reported checkpoints and final files into the run folder after them, also after a failure, and
deletes that folder and nothing else (``distributed.ray_storage``). Exit codes: 0 when every
worker finished; 1 when the training failed (a worker died or raised: Ray Train ends the others; no
restarts); 2 when the cluster cannot be reached, lacks the resources or the storage cannot take the
inputs (said on stderr, which ``launcher.log`` keeps).
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

from trainer_core.distributed.launch import ADDRESS_ENV, KEY_ENV, PROJECT_ROOT, RAY_ENV, RAY_FILES_ENV

NO_CLUSTER_EXIT = 2


def worker_loop(config: dict[str, Any]) -> None:
    """One Ray Train worker: the job thread's address and key into the environment, then
    ``rank_main.main`` (which removes them again at once)."""
    os.environ[ADDRESS_ENV], os.environ[KEY_ENV] = config["address"], config["key"]
    if config.get("files"):  # a ray_storage_path run: where the staged inputs are (training.ray_files)
        os.environ[RAY_FILES_ENV] = json.dumps(config["files"])
    from trainer_core.training.rank_main import main

    code = main()
    if code:
        raise SystemExit(code)


def missing_resources(cluster: dict[str, float], settings: dict[str, Any]) -> str | None:
    """Why ``cluster`` (``ray.cluster_resources()``: totals by name) cannot hold the run's workers,
    naming the fields; None when it can. Ray Train would wait for them forever."""
    want = dict(settings["resources"])
    if settings["use_gpu"]:
        want.setdefault("GPU", 1.0)
    for name, amount in want.items():
        needed = amount * settings["workers"]
        if needed > cluster.get(name, 0.0):
            workers = f"{settings['workers']} worker{'s' if settings['workers'] != 1 else ''}"
            return (
                f"num_workers / resources_per_worker: {workers} x {amount:g} {name} need "
                f"{needed:g} {name}, and the cluster has {cluster.get(name, 0.0):g}: lower them, or add nodes"
            )
    return None


def main() -> int:
    """Run the job's workers on the cluster (see the module). Returns the exit code."""
    settings = json.loads(os.environ.pop(RAY_ENV))
    loop = {"address": os.environ.pop(ADDRESS_ENV), "key": os.environ.pop(KEY_ENV)}
    import ray
    from ray.train import FailureConfig, RunConfig, ScalingConfig
    from ray.train.torch import TorchTrainer

    try:
        ray.init(
            address=settings["address"],
            runtime_env={"env_vars": {"PYTHONPATH": str(PROJECT_ROOT), "OMP_NUM_THREADS": settings["threads"]}},
            logging_level="WARNING",
        )
    except (ConnectionError, RuntimeError, ValueError) as exc:
        print(f"ray_address: cannot reach the Ray cluster at {settings['address']}: {exc}", file=sys.stderr)
        return NO_CLUSTER_EXIT
    problem = missing_resources(ray.cluster_resources(), settings)
    if problem:
        print(problem, file=sys.stderr)
        return NO_CLUSTER_EXIT
    files = settings.get("files")
    if files:
        staged = stage(files, settings["name"], settings["job_id"])
        if staged is None:
            return NO_CLUSTER_EXIT
        loop["files"] = {"storage": files["storage"], "name": settings["name"], "inputs": staged}
    trainer = TorchTrainer(
        worker_loop,
        train_loop_config=loop,
        scaling_config=ScalingConfig(
            num_workers=settings["workers"],
            use_gpu=settings["use_gpu"],
            resources_per_worker=settings["resources"],
        ),
        run_config=RunConfig(
            name=settings["name"],
            storage_path=files["storage"] if files else settings["storage"],
            failure_config=FailureConfig(max_failures=0),
        ),
    )
    code = 0
    try:
        trainer.fit()
    except Exception as exc:  # noqa: BLE001 - Ray Train's TrainingFailedError and its kin: reported, exit 1
        print(f"Ray Train failed: {type(exc).__name__}: {exc}", file=sys.stderr)
        code = 1
    if files:  # also after a failure: the checkpoints reported so far stay resumable
        code = bring_back(files, settings["name"], settings["job_id"]) or code
    return code


def _first_line(exc: BaseException) -> str:
    return str(exc).splitlines()[0] if str(exc) else type(exc).__name__


def stage(files: dict[str, Any], name: str, job_id: str) -> dict[str, list[str]] | None:
    """Make the run's staging folder ``<storage>/<name>`` (new, marked as ``job_id``'s:
    ``ray_storage.open_staging``) and copy the inputs there; the staged mapping, or None after saying
    why on stderr (a half-staged folder is removed again)."""
    from trainer_core.distributed.ray_storage import open_staging, remove_run, stage_inputs

    storage = files["storage"]
    try:
        open_staging(storage, name, job_id)
    except FileExistsError:
        print(f"ray_storage_path: {storage}/{name} already exists; a run never takes over a folder it did not "
              "make: start the run again (it picks a new name)", file=sys.stderr)  # fmt: skip
        return None
    except (OSError, ValueError) as exc:  # pyarrow's errors: OSError, ArrowInvalid (a ValueError)
        print(f"ray_storage_path: cannot make a folder in {storage}: {_first_line(exc)}", file=sys.stderr)
        return None
    try:
        staged = stage_inputs(storage, name, files["inputs"])
    except (OSError, ValueError) as exc:
        print(f"ray_storage_path: the inputs cannot be copied to {storage}: {_first_line(exc)}", file=sys.stderr)
        try:
            remove_run(storage, name, job_id)
        except (OSError, ValueError):
            pass
        return None
    print(f"staged the inputs in {storage}/{name}/inputs", file=sys.stderr)
    return staged


def bring_back(files: dict[str, Any], name: str, job_id: str) -> int:
    """Copy the reported checkpoints and ``final`` from the staging folder into the run folder, then
    delete the staging folder (only one marked as ``job_id``'s); 0, or 1 after saying why on stderr."""
    from trainer_core.distributed.ray_storage import fetch_outputs, remove_run

    try:
        copied = fetch_outputs(files["storage"], name, Path(files["run_folder"]), job_id)
        removed = remove_run(files["storage"], name, job_id)  # all of it is in the run folder now
    except (OSError, ValueError) as exc:
        print(f"ray_storage_path: the results cannot be copied back: {exc}", file=sys.stderr)
        return 1
    print(f"copied into the run folder: {', '.join(copied) or 'nothing'}", file=sys.stderr)
    if not removed:
        print(f"ray_storage_path: left {files['storage']}/{name}: it is not marked as this run's", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
