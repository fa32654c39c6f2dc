"""The pre-flight check of an embedding run (and the errors Start refuses on): its rows read as
training reads them (``data.prepare_embedding_data``), the loss they choose, the Matryoshka sizes
against the model's embedding size, and one line: rows, loss, text lengths in tokens, truncation
share and duplicates that would be false in-batch negatives; the memory and time estimates
(``estimates``)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Optional

import datasets
import numpy as np

from trainer_core.data.errors import DatasetError
from trainer_core.data.prepare import split_validation
from trainer_core.kinds.embedding.data import EmbeddingData, prepare_embedding_data
from trainer_core.kinds.embedding.estimates import estimates
from trainer_core.kinds.embedding.loading import EmbedderLoadError, checked_modules, is_sentence_transformers_folder
from trainer_core.kinds.embedding.losses import IN_BATCH, batch_sampler, check_dims, chosen_loss
from trainer_core.preflight.check import length_histogram, refused_report
from trainer_core.preflight.report import FileCheck, Issue
from trainer_core.preflight.rules import COVERED_SHARE, TRUNCATED_SHARE, covering_length, data_error, tokenizer_missing
from trainer_core.preflight.steps import plan_steps
from trainer_core.preflight.tokens import RowCounts
from trainer_core.refusals import Refusal
from trainer_core.request.rules import mini_batch_size_is_cached
from trainer_core.vocabulary import TrainingMethod, TrainingType

POOLING_CONFIG = "1_Pooling/config.json"  # a sentence-transformers folder's pooling: its embedding size


def embedding_dimension(folder: Optional[Path]) -> Optional[int]:
    """The embedding size of the model in ``folder`` from its files alone: the pooling module's
    ``word_embedding_dimension``, else config.json's ``hidden_size``; None when unknown."""
    if folder is None:
        return None
    for name, key in ((POOLING_CONFIG, "word_embedding_dimension"), ("config.json", "hidden_size")):
        try:
            value = json.loads((Path(folder) / name).read_text(encoding="utf-8")).get(key)
        except (OSError, ValueError, AttributeError):
            continue
        if isinstance(value, int):
            return value
    return None


def check_training_type(request: Any) -> None:
    """Raise Refusal (field ``training_type``) for qlora: no 4-bit loading for embedders."""
    if request.training_type == TrainingType.qlora:
        raise Refusal(
            "training_type qlora: 4-bit loading is not offered for embedding models (their weights are small); "
            "choose lora or full",
            fields=("training_type",),
            code="qlora_embedding",
        )


def check_method(request: Any) -> None:
    """Raise Refusal (fields ``training_method``, ``model_name``) for a generation method: an
    embedding model trains with its own losses (``embedding_loss``), under sft."""
    if request.training_method != TrainingMethod.sft:
        raise Refusal(
            f"training_method {request.training_method.value} trains a text generator, but {request.model_name} is an "
            "embedding model: leave training_method sft (its loss is embedding_loss), or pick a text model",
            fields=("training_method", "model_name"),
            code="embedding_method",
        )


def check_request(request: Any, data: EmbeddingData, folder: Optional[Path]) -> None:
    """Raise Refusal for what the data and model make impossible: a generation method
    (``check_method``), qlora, a module read from outside the model's folder
    (``loading.checked_modules``), a loss that does not fit the columns, ``mini_batch_size`` with a
    loss that does not read it (also one the data chose), Matryoshka sizes above the model's
    embedding size."""
    check_method(request)
    if is_sentence_transformers_folder(folder):
        try:
            checked_modules(folder)
        except EmbedderLoadError as exc:
            raise Refusal(str(exc), fields=("model_name",), code="embedding_modules_outside") from None
    check_training_type(request)
    loss = chosen_loss(request, data.format)
    mini_batch_size_is_cached(request.model_copy(update={"embedding_loss": loss}))  # also for a loss the data chose
    dimension = embedding_dimension(folder)
    if dimension is not None:
        check_dims(request, dimension)


def check_line(request: Any, data: EmbeddingData) -> str:
    """The check's line, e.g. "Embedding pairs (anchor, positive): 950 rows (50 held out); loss
    MultipleNegativesRankingLoss, no_duplicates batches; texts up to 692 tokens, 14 rows (1.5 %) cut
    at 512; 3 duplicate anchors, 0 duplicate positives (false in-batch negatives)"."""
    stats, loss = data.stats, chosen_loss(request, data.format)
    held = f" ({len(data.eval)} held out)" if data.eval is not None else ""
    share = 100.0 * stats.truncated_rows / max(stats.rows, 1)
    line = (
        f"Embedding {data.format.value} ({', '.join(data.train.column_names)}): {stats.rows} rows{held}; loss "
        f"{loss.value}{' in MatryoshkaLoss' if request.matryoshka_dims else ''}, {batch_sampler(loss)} batches; "
        f"texts up to {stats.longest_tokens} tokens, mean {stats.total_tokens / max(stats.rows, 1):.0f} a row as embedded, "
        f"{stats.truncated_rows} rows ({share:.1f} %) cut at {stats.max_seq_length}"
    )
    if loss in IN_BATCH:
        line += (
            f"; {stats.duplicate_anchors} duplicate anchors, {stats.duplicate_positives} duplicate positives "
            "(false in-batch negatives)"
        )
    return line


def truncation(request: Any, data: EmbeddingData) -> Optional[Issue]:
    """The text runs' ``rows_truncated`` warning for embedding rows: more than TRUNCATED_SHARE of the
    training rows have a text over max_seq_length, or the tokenizer's own limit where lower (each text
    is cut there when embedded)."""
    stats = data.stats
    if not stats.rows or stats.truncated_rows / stats.rows <= TRUNCATED_SHARE:
        return None
    share = f"{stats.truncated_rows} of {stats.rows} training rows ({stats.truncated_rows / stats.rows:.0%})"
    lost = f"cut when embedded ({stats.truncated_tokens} tokens lost)"
    if stats.max_seq_length < request.max_seq_length:  # the tokenizer's own limit is lower
        message = (
            f"{share} have a text longer than the model's limit of {stats.max_seq_length} tokens (below "
            f"max_seq_length={request.max_seq_length}), {lost}: shorten the texts, or pick a model with a longer limit"
        )
    else:
        message = (
            f"{share} have a text longer than max_seq_length={stats.max_seq_length} tokens, {lost}: set "
            f"max_seq_length to {covering_length(np.asarray(data.row_lengths))} to keep {COVERED_SHARE:.0%} of rows "
            "whole (longer texts cost memory and time), or shorten the texts"
        )
    return Issue(level="warning", code="rows_truncated", fields=["max_seq_length"], message=message)


def file_checks(request: Any, data: EmbeddingData) -> list[FileCheck]:
    """One FileCheck per training and evaluation source: rows read and kept (every row is kept: long
    texts are cut, not dropped); with ``val_size`` each file's rows held out for evaluation (the same
    split as training's: ``split_validation`` of the joined rows)."""
    held = [0] * len(data.sources)
    if request.val_size > 0 and data.sources:
        owner = [i for i, (_, rows) in enumerate(data.sources) for _ in range(rows)]
        _, evaluation = split_validation(datasets.Dataset.from_dict({"source": owner}), request)
        for i in evaluation["source"]:
            held[i] += 1
    out = []
    for (name, rows), out_rows in zip(data.sources, held):
        notes = (
            [f"{out_rows} rows held out for evaluation (val_size={request.val_size:g})"] if request.val_size > 0 else []
        )
        out.append(
            FileCheck(
                name=name,
                split="train",
                format=data.format.value,
                rows_read=rows,
                rows_kept=rows - out_rows,
                rows_dropped=0,
                notes=notes,
            )
        )
    for name, rows in data.eval_sources:
        out.append(
            FileCheck(name=name, split="eval", format=data.format.value, rows_read=rows, rows_kept=rows, rows_dropped=0)
        )
    return out


def embedding_report(request: Any, folder: Optional[Path], tokenizer: Any, started: float) -> Any:
    """The ``PreflightReport`` of an embedding run (``started``: the check's ``perf_counter``):
    rows, tokens, steps and the kind's line (``vision``: the model kind's line), or the refusal as
    its error (codes as the refusals': ``data_error`` for data, else the Refusal's own)."""
    if tokenizer is None:  # a Hub model not on this machine: the worker reads the data
        return refused_report(request, [], started, False, [tokenizer_missing(request.model_name)])
    if request.hf_dataset:  # Hub data: read by the worker, as for text
        return refused_report(request, [], started)
    try:
        data = prepare_embedding_data(request, tokenizer)
        check_request(request, data, folder)
    except DatasetError as exc:
        return refused_report(request, [data_error(exc)], started)
    except Refusal as exc:
        issue = Issue(level="error", code=exc.code, message=str(exc), fields=list(exc.fields))
        return refused_report(request, [issue], started)
    stats = data.stats
    plan = plan_steps(stats.rows, request)
    report = refused_report(request, [], started)
    costs = estimates(request, folder, data, plan)
    warnings = [w for w in (truncation(request, data), costs.pop("warning", None)) if w]
    lengths = RowCounts(
        full=np.asarray(data.row_lengths), trained=None, trainable=None, max_seq_length=stats.max_seq_length
    )
    return report.model_copy(
        update=dict(
            **costs,
            warnings=[*report.warnings, *warnings],
            files=file_checks(request, data),
            histogram=length_histogram(lengths),
            rows_read=stats.rows + (len(data.eval) if data.eval is not None else 0),
            rows_kept=stats.rows,
            rows_truncated=stats.truncated_rows,
            rows_truncated_share=round(stats.truncated_rows / max(stats.rows, 1), 4),
            tokens_total=stats.total_tokens,
            tokens_trained=stats.trained_tokens,
            tokens_cut=stats.truncated_tokens,
            eval_rows=len(data.eval) if data.eval is not None else 0,
            steps_per_epoch=plan.steps_per_epoch,
            total_steps=plan.total_steps,
            epochs=plan.epochs,
            vision=check_line(request, data),
        )
    )
