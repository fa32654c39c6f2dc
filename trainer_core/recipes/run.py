"""A recipe run: seeds, records made ``max_parallel_requests`` at a time, near-duplicates removed,
counts by gate; Stop (an event) keeps what was made. A preview makes the first N records and
writes nothing."""

from __future__ import annotations

import logging
import threading
import time
from collections import Counter
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from typing import Any, Optional

from pydantic import SecretStr

from trainer_core.recipes.columns import lookup
from trainer_core.recipes.gates import DROP_REASONS, near_duplicates
from trainer_core.recipes.records import Record, make_record
from trainer_core.recipes.schema import Recipe
from trainer_core.recipes.sources.seeds import Seeds, recipe_seeds
from trainer_core.recipes.writer import Writer
from trainer_core.settings import Settings

log = logging.getLogger(__name__)
Progress = Callable[[int, int, dict[str, int]], None]  # (records done, records in all, dropped by gate)
OnRecord = Callable[[Record], None]  # each record as it is made, in the calling thread


@dataclass
class RecipeResult:
    """What a run made: kept records (in record order), dropped ones with why, and its counts."""

    seeds: Seeds
    kept: list[Record]
    dropped: list[Record]
    records: int  # records asked for (a stopped run made fewer)
    stopped: bool
    seconds: float
    requests: int
    prompt_tokens: int
    completion_tokens: int
    counts: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        by_reason = Counter(r.reason for r in self.dropped)
        self.counts = {
            "records": self.records,
            "made": len(self.kept) + len(self.dropped),
            "kept": len(self.kept),
            "dropped": {reason: by_reason.get(reason, 0) for reason in DROP_REASONS},
        }


def full_run_estimate(recipe: Recipe, preview: RecipeResult) -> dict[str, Any]:
    """The full run's records, seconds and tokens, scaled from ``preview`` (same concurrency)."""
    records = recipe.num_records or len(preview.seeds.rows)
    made = max(preview.counts["made"], 1)
    return {
        "records": records,
        "seconds": round(preview.seconds * records / made),
        "tokens": round((preview.prompt_tokens + preview.completion_tokens) * records / made),
    }


def _dedupe(recipe: Recipe, kept: list[Record]) -> tuple[list[Record], list[Record]]:
    """(kept, dropped as ``dedupe``) by the recipe's dedupe gate."""
    if recipe.gates.dedupe is None or not kept:
        return kept, []
    path = recipe.gates.dedupe.column
    texts = [str(lookup(r.row, path)) for r in kept]
    twins = near_duplicates(texts, recipe.gates.dedupe.threshold)
    for index, first in twins.items():
        kept[index].reason, kept[index].detail = "dedupe", f"{path} is a near-duplicate of record {kept[first].index}"
    return [r for i, r in enumerate(kept) if i not in twins], [kept[i] for i in twins]


def sorted_out(recipe: Recipe, done: list[Record]) -> tuple[list[Record], list[Record]]:
    """(kept, dropped) of the records ``done``: those a gate dropped, then the near-duplicates of
    kept ones (each record in one list, once)."""
    failed = [r for r in done if r.reason is not None]  # before dedupe marks its twins
    kept, twins = _dedupe(recipe, [r for r in done if r.reason is None])
    return kept, failed + twins


def run_recipe(
    recipe: Recipe,
    settings: Settings,
    api_key: Optional[SecretStr] = None,
    preview: int = 0,
    progress: Optional[Progress] = None,
    stop: Optional[threading.Event] = None,
    on_record: Optional[OnRecord] = None,
    made_before: tuple[Record, ...] = (),
) -> RecipeResult:
    """Make ``recipe``'s records (``preview``: only the first that many). ``on_record`` gets each
    record as it is made (the task appends it to the result folder); ``made_before`` are the
    records of an earlier part of this run (resume): their indices are skipped and they count in
    the result. Raises RecipeError before the first request for a recipe, source or endpoint that
    cannot be used, and during the run when the endpoint refuses the key or cannot be reached."""
    began = time.monotonic()
    writer = Writer(recipe.model, api_key, settings.allow_remote_recipe_models)  # the endpoint checked first
    seeds = recipe_seeds(recipe, settings)
    total = recipe.num_records or len(seeds.rows)
    total = min(total, preview) if preview else total
    stop = stop or threading.Event()
    done: list[Record] = [r for r in made_before if r.index < total]
    skip = {r.index for r in done}
    dropped_by: Counter = Counter(r.reason for r in done if r.reason)
    workers = recipe.model.inference_parameters.max_parallel_requests
    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="recipe") as pool:
        pending: set[Future] = set()
        next_index = 0
        while next_index < total or pending:
            while next_index < total and len(pending) < 2 * workers and not stop.is_set():
                if next_index not in skip:
                    seed = seeds.rows[next_index % len(seeds.rows)]
                    pending.add(pool.submit(make_record, recipe, writer, seed, next_index))
                next_index += 1
            if stop.is_set() and next_index < total:
                next_index = total  # Stop: finish what is in flight, ask for nothing more
            if not pending:
                break
            finished, pending = wait(pending, return_when=FIRST_COMPLETED)
            for future in finished:
                try:
                    record = future.result()
                except BaseException:
                    stop.set()
                    for other in pending:
                        other.cancel()
                    raise
                done.append(record)
                if on_record:
                    on_record(record)
                if record.reason:
                    dropped_by[record.reason] += 1
                if progress:
                    progress(len(done), total, dict(dropped_by))
    done.sort(key=lambda r: r.index)
    kept, dropped = sorted_out(recipe, done)
    result = RecipeResult(
        seeds=seeds,
        kept=kept,
        dropped=dropped,
        records=total,
        stopped=stop.is_set() and len(done) < total,
        seconds=time.monotonic() - began,
        requests=writer.requests,
        prompt_tokens=writer.prompt_tokens,
        completion_tokens=writer.completion_tokens,
    )
    log.info("recipe %s: %d records kept of %d made in %.1f s", recipe.name, len(kept), len(done), result.seconds)
    return result
