"""A Ray Train worker's files when the run has a storage path (``ray_storage_path``; the layout is
``distributed.ray_storage``'s): the worker trains in a scratch folder of its own machine, with the
inputs the driver staged copied down (``localize``), reports each checkpoint to Ray Train as it is
saved (``CheckpointReport``: every rank, so rank 0's weights and each rank's random state meet in
``<storage>/<run>/checkpoint-N``) and, at the end, rank 0's run folder (``report_final``). The
driver copies them into the studio's run folder. Ray Train's API: ``ray.train.report(metrics,
checkpoint=Checkpoint.from_directory(path), checkpoint_dir_name=...)``, which every worker calls at
the same points (https://docs.ray.io/en/latest/train/user-guides/checkpoints.html)."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path
from typing import Any

from transformers import TrainerCallback

from trainer_core.distributed.ray_storage import CHECKPOINT, FINAL, METRICS, fetch_inputs
from trainer_core.schemas import TrainingStartRequest
from trainer_core.training.checkpoints import staging_dir


def localize(request: TrainingStartRequest, spec: dict[str, Any]) -> tuple[TrainingStartRequest, Path]:
    """Copy the staged inputs (``spec``: storage, name, inputs) into a new scratch folder; returns
    ``request`` with its paths pointing at those copies, and the scratch run folder (holding the
    run's earlier ``metrics.jsonl`` when one was staged). Raises OSError when the storage cannot be
    read."""
    scratch = Path(tempfile.mkdtemp(prefix="studio-ray-"))
    local = fetch_inputs(spec["storage"], spec["name"], spec["inputs"], scratch / "inputs")
    out = scratch / "out"
    out.mkdir()
    updates: dict[str, Any] = {}
    for field, paths in local.items():
        if field == "metrics":
            shutil.copyfile(paths[0], out / METRICS)
        elif field in ("local_datasets", "local_eval_datasets"):
            updates[field] = paths
        else:
            updates[field] = paths[0]
    return request.model_copy(update=updates), out


class CheckpointReport(TrainerCallback):
    """After each checkpoint save, report it to Ray Train under the name ``checkpoint-N``: every rank
    reports its own folder (rank 0's published ``checkpoint-N``; on another machine, the rank's part
    left in ``safe_saves``' staging folder, its ``rng_state_<rank>.pth``), and Ray Train copies their
    files into one folder. Rank 0 adds the run's ``metrics.jsonl`` so far, which the studio takes
    when the run ends without its final report (a lost worker)."""

    def on_save(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        import ray.train
        from ray.train import Checkpoint

        name = f"checkpoint-{state.global_step}"
        folder = Path(args.output_dir) / name
        if not folder.is_dir():  # another machine than rank 0's: its part stays in the staging folder
            folder = staging_dir(Path(args.output_dir), name) / name
        metrics = Path(args.output_dir) / METRICS
        if state.is_world_process_zero and folder.is_dir() and metrics.is_file():  # the steps so far, kept
            shutil.copyfile(metrics, folder / METRICS)  # with it should the run end before its final report
        checkpoint = Checkpoint.from_directory(str(folder)) if folder.is_dir() else None
        ray.train.report({"step": state.global_step}, checkpoint=checkpoint, checkpoint_dir_name=name)


def report_final(out: Path, rank: int) -> None:
    """Report rank 0's run folder (without its checkpoints, reported already) as ``final``; the
    other ranks report nothing but take part, as Ray Train asks of every worker."""
    import ray.train
    from ray.train import Checkpoint

    if rank != 0:
        ray.train.report({"final": True}, checkpoint=None, checkpoint_dir_name=FINAL)
        return
    with tempfile.TemporaryDirectory(prefix="studio-final-") as tmp:
        for entry in out.iterdir():
            if entry.is_dir() and CHECKPOINT.match(entry.name):
                continue
            (shutil.copytree if entry.is_dir() else shutil.copy2)(entry, Path(tmp) / entry.name)
        ray.train.report({"final": True}, checkpoint=Checkpoint.from_directory(tmp), checkpoint_dir_name=FINAL)


class Relabelled:
    """The worker's ``events`` with the scratch run folder named as the studio's run folder in each
    event's ``message`` and ``output_dir`` (the user knows that folder; the scratch is gone after)."""

    def __init__(self, events: Any, scratch: Path, run_folder: str) -> None:
        self.events, self.scratch, self.run_folder = events, str(scratch), run_folder

    def put(self, event: tuple[str, dict]) -> None:
        """Relabel and pass ``event`` on."""
        kind, payload = event
        if isinstance(payload, dict):
            payload = {
                key: value.replace(self.scratch, self.run_folder)
                if key in ("message", "output_dir") and isinstance(value, str)
                else value
                for key, value in payload.items()
            }
        self.events.put((kind, payload))


def remove_scratch(out: Path) -> None:
    """Remove the scratch folder ``localize`` made (``out`` is inside it)."""
    shutil.rmtree(out.parent, ignore_errors=True)
