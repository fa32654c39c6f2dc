"""Text scores of generated answers against the references.

- ROUGE-L F1 per row, 0..1: ``rouge_score.rouge_scorer.RougeScorer(["rougeL"], use_stemmer=True)``,
  ``score(target=reference, prediction=answer)["rougeL"].fmeasure`` (the library the ``evaluate``
  library's ``rouge`` metric wraps, with its default stemming; its tokenizer keeps only ASCII
  letters and digits, so text in other scripts scores 0). The model's score is the mean over rows.
- BLEU, 0..100: ``sacrebleu.corpus_bleu(answers, [references])`` (corpus level: n-gram counts
  summed over all rows before the geometric mean and brevity penalty; sacrebleu's default 13a
  tokenizer), as the ``evaluate`` library's ``sacrebleu`` metric computes it.
- Exact match per row: ``answer.strip() == reference.strip()``; the model's score is the share, 0..1.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Optional


@dataclass
class TextScores:
    """Per-row ROUGE-L F1 and exact match, and the corpus scores (means / BLEU)."""

    rouge_l: list[float]
    exact: list[bool]
    bleu: Optional[float]

    @property
    def rouge_l_mean(self) -> Optional[float]:
        """Mean ROUGE-L F1 over the rows (None without rows)."""
        return sum(self.rouge_l) / len(self.rouge_l) if self.rouge_l else None

    @property
    def exact_match(self) -> Optional[float]:
        """Share of rows answered exactly (None without rows)."""
        return sum(self.exact) / len(self.exact) if self.exact else None


@lru_cache(maxsize=1)
def _rouge() -> Any:
    from rouge_score import rouge_scorer

    return rouge_scorer.RougeScorer(["rougeL"], use_stemmer=True)


def score_answers(answers: list[str], references: list[str]) -> TextScores:
    """The scores of ``answers`` against ``references`` (same length, same order)."""
    import sacrebleu

    if len(answers) != len(references):
        raise ValueError(f"{len(answers)} answers for {len(references)} references")
    rouge = [_rouge().score(target=ref, prediction=ans)["rougeL"].fmeasure for ans, ref in zip(answers, references)]
    exact = [ans.strip() == ref.strip() for ans, ref in zip(answers, references)]
    bleu = sacrebleu.corpus_bleu(answers, [references]).score if answers else None
    return TextScores(rouge_l=rouge, exact=exact, bleu=bleu)
