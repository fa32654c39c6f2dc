"""Evaluation requests and results (API bodies, CLI, Runs tab). Field metadata lives here once."""

from __future__ import annotations

from typing import Optional

from pydantic import BaseModel, ConfigDict, Field

from trainer_core.request.base import MAX_FILES, PathText
from trainer_core.vocabulary import OptionalWholeNumber, WholeNumber

CPU_DEFAULT_ROWS = 50


class EvaluateRequest(BaseModel):
    """Run a model over held-out rows: loss and perplexity on the answers, then greedy answers
    scored against the references (ROUGE-L, BLEU, exact match), beside the base model's. An
    embedding model is scored on retrieval instead (``max_new_tokens`` unused; ``batch_size``: texts
    embedded at once; ``max_rows``: all rows when empty)."""

    model_config = ConfigDict(extra="forbid")

    model: str = Field(
        "base", min_length=1, max_length=200, description="base, a run's job id, or JOB_ID/checkpoint-N."
    )
    datasets: list[PathText] = Field(
        default_factory=list,
        max_length=MAX_FILES,
        description="Held-out files (same formats as training); empty: the run's own evaluation data (its eval files, Hub eval split or val_size split).",
    )
    max_rows: OptionalWholeNumber = Field(
        None,
        ge=1,
        le=100_000,
        description=f"Rows to evaluate (from the start); empty: all on a GPU, the first {CPU_DEFAULT_ROWS} on CPU.",
    )
    max_new_tokens: WholeNumber = Field(128, ge=1, le=4096, description="Longest generated answer, in tokens.")
    batch_size: WholeNumber = Field(8, ge=1, le=512, description="Rows per batch, for the loss and for generation.")
    compare_base: bool = Field(
        True, description="Also answer with the base model (adapter switched off) for the side-by-side table."
    )
    speech_to_text_model: Optional[PathText] = Field(
        None,
        description="Text-to-speech runs: a local speech-to-text model folder (e.g. Whisper) that transcribes the "
        "speech the model says for each held-out text (word error rate of the round trip); empty: the "
        "reconstruction loss only.",
    )


class Scores(BaseModel):
    """Scores of one model over the evaluated rows. ``loss`` is the mean token cross-entropy over
    answer tokens (nats), ``perplexity`` = exp(loss); ``rouge_l`` is ROUGE-L F1 (rouge_score,
    stemmed) averaged over rows, 0..1; ``bleu`` is corpus BLEU (sacrebleu, 0..100); ``exact_match``
    the share of answers equal to the reference after stripping whitespace, 0..1. An embedding
    model's scores are retrieval metrics instead (sentence-transformers' evaluators, cosine
    similarity): ``ndcg_at_10`` .. ``recall_at_10`` 0..1, ``spearman`` -1..1 (scored pairs). A
    speech-to-text model's are ``wer`` and ``cer`` (jiwer, over all held-out clips; 0 is perfect).
    Held-out rows with tools add the tool-call scores ``valid_call_rate`` .. ``quiet_when_should_not``
    (``evaluation.tool_calls``; None without tools)."""

    loss: Optional[float] = None
    perplexity: Optional[float] = None
    rouge_l: Optional[float] = None
    bleu: Optional[float] = None
    exact_match: Optional[float] = None
    answer_tokens: int = 0
    generated_tokens: int = 0
    tokens_per_second: Optional[float] = None
    ndcg_at_10: Optional[float] = Field(None, description="Retrieval nDCG@10 over the held-out queries (0..1).")
    mrr_at_10: Optional[float] = Field(None, description="Retrieval MRR@10 over the held-out queries (0..1).")
    recall_at_1: Optional[float] = Field(
        None, description="Share of held-out queries whose own passage ranks first (0..1)."
    )
    recall_at_10: Optional[float] = Field(
        None, description="Share of held-out queries whose own passage is in the top 10 (0..1)."
    )
    spearman: Optional[float] = Field(
        None, description="Spearman correlation of cosine similarity with the held-out scores (-1..1)."
    )
    wer: Optional[float] = Field(
        None, description="Speech-to-text: word error rate of the transcripts against the references (0 is perfect)."
    )
    cer: Optional[float] = Field(
        None, description="Speech-to-text: character error rate of the transcripts against the references."
    )
    valid_call_rate: Optional[float] = Field(
        None,
        description="Held-out rows with tools: of the answers that began a call, the share whose calls all parse "
        "and match a defined function's schema (0..1; ``tools.scoring``).",
    )
    name_accuracy: Optional[float] = Field(
        None, description="Rows with tools that should call: the share whose first call names the expected function."
    )
    arguments_exact: Optional[float] = Field(
        None, description="Rows with tools that should call: the share whose calls equal the expected (parsed JSON)."
    )
    called_when_should: Optional[float] = Field(
        None, description="Rows with tools that should call: the share where the model began a call."
    )
    quiet_when_should_not: Optional[float] = Field(
        None, description="Rows with tools that should answer in words: the share where the model began no call."
    )


class EvaluationResult(BaseModel):
    """What an evaluation measured; the per-row table is ``predictions_file`` (JSONL with prompt,
    reference, base_answer, tuned_answer and per-row scores; see ``evaluation.report``) in the
    task's folder. ``tuned`` scores the chosen model (the base model itself when ``model`` is
    ``base``); ``base`` its base with the adapter switched off (None when not compared).
    ``rows_available`` counts the rows of the evaluation set that have a prompt and an answer (a row
    with tools once per assistant turn: ``evaluation.rows``);
    ``tokens_per_second`` is all generated tokens / all seconds inside ``generate``."""

    rows_evaluated: int
    rows_available: int
    tuned: Scores
    base: Optional[Scores] = None
    predictions_file: str = "predictions.jsonl"
    seconds: float = 0.0
    tokens_per_second: Optional[float] = None
    source: str = Field("", description="The evaluation data: file names, or the run's own evaluation data.")
    device: str = ""
    notes: list[str] = Field(default_factory=list)
