"""The launcher of a ``compute: ray`` run (``python -m trainer_core.training.ray_driver``): it
plays torchrun's part for ``group.RankGroup``. It connects to the Ray cluster at ``ray_address``
and runs a Ray Train ``TorchTrainer`` whose workers each run ``training.rank_main`` (the same
training worker as a local run), handed the job thread's address and key in their loop config
instead of the environment (Ray starts its workers itself). Ray Train sets up the torch process
group (gloo on CPUs, NCCL on GPUs) and ``RANK`` / ``WORLD_SIZE`` / ``LOCAL_RANK`` before the loop
runs, as torchrun would.

Its settings arrive in ``RAY_ENV`` (JSON: address, workers, resources, use_gpu, storage path, run
name; with ``ray_storage_path``, ``files``: the checked input paths and the run folder). Then it
stages the inputs in that storage before the workers start and copies the reported checkpoints and
final files into the run folder after them (``distributed.ray_storage``), also after a failure. Exit codes: 0 when every worker finished; 1 when the training failed (a worker died or
raised: Ray Train ends the others; no restarts); 2 when the cluster cannot be reached or lacks the
resources (said on stderr, which ``launcher.log`` keeps).
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
        from trainer_core.distributed.ray_storage import stage_inputs

        try:
            staged = stage_inputs(files["storage"], settings["name"], files["inputs"])
        except (OSError, ValueError) as exc:  # pyarrow's errors: OSError, ArrowInvalid (a ValueError)
            first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            print(f"ray_storage_path: the inputs cannot be copied to {files['storage']}: {first}", file=sys.stderr)
            return NO_CLUSTER_EXIT
        loop["files"] = {"storage": files["storage"], "name": settings["name"], "inputs": staged}
        print(f"staged the inputs in {files['storage']}/{settings['name']}/inputs", file=sys.stderr)
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
        from trainer_core.distributed.ray_storage import fetch_outputs, remove_run

        try:
            copied = fetch_outputs(files["storage"], settings["name"], Path(files["run_folder"]))
            remove_run(files["storage"], settings["name"])  # all of it is in the run folder now
        except (OSError, ValueError) as exc:
            print(f"ray_storage_path: the results cannot be copied back: {exc}", file=sys.stderr)
            return 1
        print(f"copied into the run folder: {', '.join(copied) or 'nothing'}", file=sys.stderr)
    return code


if __name__ == "__main__":
    sys.exit(main())
