"""Evaluation's tokens through the token cache (``data.token_cache``): the loss rows of an
evaluation are its evaluation split tokenized as training tokenizes it (answers only), so the
cache entry of that split (the run's own evaluation data, or the files given) serves an evaluation
whose key matches: the same data, the same tokenizer files and template, ``max_seq_length`` and
``train_on_completions`` on. A hit reads the Arrow files (memory mapped) and tokenizes nothing; a
miss stores the split only when every row is evaluated (a ``max_rows`` cut tokenizes just its rows;
a split the cache does not keep, e.g. Hub data without a known commit, is tokenized as before).

Only where each evaluation row is one whole data row (no row with tools, which gives one evaluation
row per assistant turn; none ending after its last answer): the cached row is then the evaluated
conversation itself.
"""

from __future__ import annotations

import logging
from typing import Any, Optional

import datasets

from trainer_core.data.token_cache.tokenized import cached, tokenized
from trainer_core.data.tokenization import finish_rows
from trainer_core.evaluation.rows import EvalRow
from trainer_core.schemas import TrainingStartRequest

log = logging.getLogger(__name__)


def plan_request(plan: dict[str, Any]) -> TrainingStartRequest:
    """The request whose "eval" split is ``plan``'s rows tokenized as evaluation tokenizes them: the
    run's own (``run_request``) or the files read as ``read_plan`` reads them, answers only."""
    update = {"train_on_completions": True, "max_seq_length": plan["max_seq_length"]}
    if "files" in plan:
        files = list(plan["files"])
        return TrainingStartRequest(local_datasets=files, local_eval_datasets=files, **update)
    return TrainingStartRequest.model_validate(plan["run_request"]).model_copy(update=update)


def whole_rows(rows: list[EvalRow], canonical: datasets.Dataset) -> bool:
    """True when each of ``rows`` is one whole row of ``canonical`` (see the module docstring)."""
    if any(row.tools or row.images for row in rows) or len({row.index for row in rows}) != len(rows):
        return False
    messages = canonical["messages"] if "messages" in canonical.column_names else []
    return all(len(messages[row.index]) == len(row.conversation) for row in rows)


def cached_loss_rows(
    plan: dict[str, Any], rows: list[EvalRow], canonical: datasets.Dataset, tokenizer: Any
) -> Optional[tuple[datasets.Dataset, int, int]]:
    """(``input_ids`` / ``labels`` of ``rows``, truncated rows, dropped rows) as ``loss.tokenize_rows``
    gives them, from the token cache; None where the cache cannot serve (see the module docstring):
    tokenize the rows then. Raises DatasetError when no row keeps an answer token, as it does."""
    if plan.get("vision") or not whole_rows(rows, canonical):
        return None
    request = plan_request(plan)
    if len(rows) == len(canonical):  # every row evaluated: a miss tokenizes them all and stores them
        encoded, hit = tokenized(request, tokenizer, "eval", lambda: (canonical, None), desc="Tokenizing")
    else:
        found = cached(request, tokenizer, "eval")
        if found is None:
            return None
        encoded, hit = found
    log.info("evaluation rows: %s", hit.line())
    kept, stats = finish_rows(encoded.select([row.index for row in rows]), request.max_seq_length)
    return kept.select_columns(["input_ids", "labels"]), stats.truncated_rows, stats.dropped_rows


__all__ = ["cached_loss_rows", "plan_request", "whole_rows"]
