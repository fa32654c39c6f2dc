"""What one evaluated model measured (``Outcome``), its ``Scores``, and the predictions table.

``predictions.jsonl`` has one JSON object per evaluated row, in the evaluation set's order:

    index          0-based position of the row in the evaluation set
    prompt         the turns before the answer, readable (a lone user turn as its text)
    reference      the expected answer (the row's last assistant turn)
    tuned_answer   the chosen model's greedy answer (the base model's when it is the choice)
    rouge_l_tuned  ROUGE-L F1 of tuned_answer, 0..1
    exact_tuned    tuned_answer.strip() == reference.strip()
    tuned_tokens   generated tokens (stop token included); tuned_finish: stop | length
    tuned_calls    rows with tools: the calls parsed from tuned_answer ([{"name", "arguments"}]);
                   null for a row without tools (``evaluation.tool_calls``)
    base_answer, rouge_l_base, exact_base, base_tokens, base_finish, base_calls
                   the same for the base model (adapter switched off); null when not compared
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from trainer_core.evaluation.generation import Generated
from trainer_core.evaluation.loss import LossResult
from trainer_core.evaluation.rows import EvalRow
from trainer_core.evaluation.schemas import Scores
from trainer_core.evaluation.scoring import TextScores
from trainer_core.evaluation.tool_calls import ToolScores

CALL_SCORES = ("valid_call_rate", "name_accuracy", "arguments_exact", "called_when_should", "quiet_when_should_not")

PREDICTIONS_FILE = "predictions.jsonl"
SCORES_FILE = "scores.json"


@dataclass
class Outcome:
    """One model's loss, answers, text scores and (rows with tools) tool-call scores over the evaluated rows."""

    loss: LossResult
    generated: Generated
    text: TextScores
    tools: Optional[ToolScores] = None

    def scores(self) -> Scores:
        """The API / stored form."""
        return Scores(
            loss=self.loss.loss,
            perplexity=self.loss.perplexity,
            rouge_l=self.text.rouge_l_mean,
            bleu=self.text.bleu,
            exact_match=self.text.exact_match,
            answer_tokens=self.loss.tokens,
            generated_tokens=self.generated.tokens,
            tokens_per_second=self.generated.tokens_per_second,
            **({key: getattr(self.tools.scores, key) for key in CALL_SCORES} if self.tools else {}),
        )

    def cut_answers(self) -> int:
        """Answers that reached max_new_tokens without a stop token."""
        return sum(answer.finish == "length" for answer in self.generated.answers)


def _side(outcome: Optional[Outcome], name: str, k: int) -> dict:
    if outcome is None:
        return {
            f"{name}_answer": None,
            f"rouge_l_{name}": None,
            f"exact_{name}": None,
            f"{name}_tokens": None,
            f"{name}_finish": None,
            f"{name}_calls": None,
        }
    answer = outcome.generated.answers[k]
    return {
        f"{name}_answer": answer.text,
        f"rouge_l_{name}": outcome.text.rouge_l[k],
        f"exact_{name}": outcome.text.exact[k],
        f"{name}_tokens": answer.tokens,
        f"{name}_finish": answer.finish,
        f"{name}_calls": outcome.tools.calls[k] if outcome.tools else None,
    }


def prediction_rows(rows: list[EvalRow], tuned: Outcome, base: Optional[Outcome]) -> list[dict]:
    """The table's rows (see the module docstring)."""
    return [
        {
            "index": row.index,
            "prompt": row.prompt_text,
            "reference": row.reference,
            **_side(tuned, "tuned", k),
            **_side(base, "base", k),
        }
        for k, row in enumerate(rows)
    ]


SCORE_ROWS = (  # Scores' field, its label, decimals shown: the report table's rows, in order
    ("loss", "loss", 4),
    ("perplexity", "perplexity", 3),
    ("rouge_l", "ROUGE-L F1", 4),
    ("bleu", "BLEU", 2),
    ("exact_match", "exact match", 3),
    ("tokens_per_second", "tokens/s", 1),
    ("ndcg_at_10", "nDCG@10", 4),
    ("mrr_at_10", "MRR@10", 4),
    ("recall_at_1", "recall@1", 4),
    ("recall_at_10", "recall@10", 4),
    ("spearman", "Spearman", 4),
    ("wer", "WER", 4),
    ("cer", "CER", 4),
    ("valid_call_rate", "Valid calls", 3),
    ("name_accuracy", "Right function", 3),
    ("arguments_exact", "Arguments exact", 3),
    ("called_when_should", "Called when it should", 3),
    ("quiet_when_should_not", "Quiet when it should not", 3),
)
TABLE_HEAD = ("metric", "base", "tuned", "change")


def score_table(tuned: Scores, base: Optional[Scores]) -> list[tuple[str, str, str, str]]:
    """The report's rows (metric, base, tuned, change = tuned - base, signed), one per score either
    model has (a text model's loss ... tokens/s, an embedding model's nDCG@10 ... Spearman, a
    speech-to-text model's WER and CER, the tool-call scores of rows with tools); "-"
    where a model has no value (base: not compared)."""
    table = []
    for key, label, digits in SCORE_ROWS:
        new, old = getattr(tuned, key), getattr(base, key) if base is not None else None
        if new is None and old is None:
            continue
        change = f"{new - old:+.{digits}f}" if new is not None and old is not None else "-"
        shown = ["-" if v is None else f"{v:.{digits}f}" for v in (old, new)]
        table.append((label, *shown, change))
    return table


def write_atomic(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` through a temporary file, so a reader never sees half a file."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


def write_predictions(folder: Path, table: list[dict]) -> Path:
    """``folder/predictions.jsonl`` (UTF-8, one object a line); returns its path."""
    path = Path(folder) / PREDICTIONS_FILE
    write_atomic(path, "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in table))
    return path
