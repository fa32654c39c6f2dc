"""The histories ``bench.history_scale`` times: runs written through the studio's own ``RunStore``
(``create_run``, ``add_metric`` per logged event, ``finish_run``, which packs the loss series) with
real ``TrainingStartRequest`` settings, spread over the past year in the mix of phases a real
history has (every 10th event an eval event, every 25th run named), and refused queue entries
(``QueueStore``)."""

from __future__ import annotations

import math
import random
import time
from pathlib import Path
from typing import Any

EVAL_EVERY = 10  # every 10th logged event of a run is an eval event
PHASES = ("completed",) * 7 + ("error", "stopped", "interrupted")  # a history's usual mix
DAY_S = 86_400.0


def _request(index: int) -> dict[str, Any]:
    """Run ``index``'s stored settings: a real ``TrainingStartRequest``'s ``public_dict()`` with a few varied fields."""
    from trainer_core.schemas import TrainingStartRequest

    request = TrainingStartRequest(
        local_datasets=[f"/data/set_{index % 17}.jsonl"],
        max_steps=100 + index % 5 * 50,
        learning_rate=1e-4 * (1 + index % 4),
        lora_r=(8, 16, 32)[index % 3],
        training_type=("lora", "qlora", "full")[index % 3] if index % 11 else "full",
    )
    return request.public_dict()


def fill(db_path: Path, runs: int, metrics: int, first: int = 0, seed: int = 0) -> None:
    """Write ``runs`` finished runs (job ids ``job_hist_<first + i>``) with ``metrics`` logged events
    in all into the history at ``db_path``, through ``RunStore``'s own methods."""
    from trainer_core.runs.store import RunStore
    from trainer_core.status import TrainingProgress

    rng = random.Random(seed)
    store = RunStore(db_path)
    now = time.time()
    per_run = max(1, metrics // max(1, runs))
    for i in range(runs):
        index = first + i
        job_id = f"job_hist_{index:05d}"
        created = now - DAY_S * 365 * (1 - (i + 1) / (runs + 1)) - 3600  # oldest first, the newest an hour ago
        store.create_run(job_id, _request(index), f"/nonexistent/runs/{job_id}", "training", created_at=created)
        tokens = 0
        for event in range(1, per_run + 1):
            step = event
            loss = 2.0 * math.exp(-event / per_run) + 0.05 * rng.random() + 0.3
            if event % EVAL_EVERY == 0:
                progress = TrainingProgress(
                    job_id=job_id, step=step, total_steps=per_run, eval_loss=loss + 0.1, elapsed_seconds=step * 2.0
                )
            else:
                tokens += 4096
                progress = TrainingProgress(
                    job_id=job_id,
                    step=step,
                    total_steps=per_run,
                    loss=loss,
                    learning_rate=1e-4,
                    grad_norm=1.0 + rng.random(),
                    epoch=event / per_run,
                    progress_percent=100.0 * event / per_run,
                    elapsed_seconds=step * 2.0,
                    num_tokens=tokens,
                )
            store.add_metric(progress)
        phase = PHASES[index % len(PHASES)]
        error = "CUDA out of memory" if phase == "error" else None
        store.finish_run(job_id, phase, error, None, phase, finished_at=created + per_run * 2.0 + 60)
        if index % 25 == 0:
            store.set_label(job_id, name=f"sweep {index // 25}", note="lr sweep")
    store.close()


def fill_queue(db_path: Path, entries: int) -> None:
    """``entries`` refused entries in the queue table of the history at ``db_path`` (refused: the
    dispatcher never starts them)."""
    from trainer_core.queue.store import QueueState, QueueStore

    queue = QueueStore(db_path)
    for index in range(entries):
        entry = queue.add(_request(index), had_token=False)
        queue.set_state(entry.queue_id, QueueState.refused, "not enough GPU memory")
    queue.close()
