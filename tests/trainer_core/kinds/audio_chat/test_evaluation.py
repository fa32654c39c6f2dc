"""Evaluating an audio-in chat run (``AUDIO_CHAT.evaluation()``) through the evaluation's own doors:
``sources.plan_data`` + ``worker.evaluate`` (the task worker's code, in process). The run: a LoRA
adapter of the tiny Qwen2-Audio (PEFT's random init, so tuned differs from base; no training step)
with a 50 % held-out split of ``mllm_audio_demo.json``; each held-out row's answers, generated from
its clip and prompt, are scored by WER and CER equal to jiwer's over the answers written to
``predictions.jsonl``, beside the loss on the answer tokens, and the report table shows them."""

from __future__ import annotations

import dataclasses
import json

import jiwer
import pytest

from trainer_core.cli.chat import choice_for
from trainer_core.evaluation.report import PREDICTIONS_FILE, SCORES_FILE, score_table
from trainer_core.evaluation.sources import plan_data
from trainer_core.evaluation.worker import evaluate
from trainer_core.kinds.audio_chat.evaluation import AudioChatEvaluation
from trainer_core.model_kind import kind_named
from trainer_core.schemas import TrainingStartRequest
from trainer_core.settings import get_settings


@pytest.fixture(scope="module")
def run(tiny_audio_chat_dir, datasets_dir, tmp_path_factory):
    """A LoRA run's folder of the tiny Qwen2-Audio (adapter, processor, request.json)."""
    import torch
    from peft import get_peft_model
    from transformers import AutoModelForMultimodalLM

    from trainer_core.kinds.audio_chat.processor import load_processor
    from trainer_core.training.wiring import new_lora

    folder = tmp_path_factory.mktemp("audio-chat-eval")
    request = TrainingStartRequest(
        model_name=str(tiny_audio_chat_dir),
        local_datasets=[str(datasets_dir / "mllm_audio_demo.json")],
        val_size=0.5,
        max_seq_length=512,
    )
    torch.manual_seed(0)
    model = AutoModelForMultimodalLM.from_pretrained(tiny_audio_chat_dir)
    config = dataclasses.replace(new_lora(request, model), init_lora_weights=False)
    get_peft_model(model, config).save_pretrained(folder)
    load_processor(tiny_audio_chat_dir).save_pretrained(folder)
    (folder / "request.json").write_text(json.dumps(request.public_dict()), encoding="utf-8")  # as the runner does
    return folder


@pytest.fixture
def allowed(monkeypatch, datasets_dir, tiny_audio_chat_dir):
    monkeypatch.setenv("STUDIO_ALLOWED_PATHS", f"{datasets_dir}:{tiny_audio_chat_dir.parent}")
    get_settings.cache_clear()
    yield
    get_settings.cache_clear()


def test_a_run_is_scored_by_loss_wer_and_cer_beside_its_base_row_by_row(allowed, run, tmp_path):
    choice = choice_for(str(run))
    plan = plan_data(choice, [], None)
    assert plan["kind"] == "audio_chat" and isinstance(kind_named(plan["kind"]).evaluation(), AudioChatEvaluation)
    context = {"choice": choice.model_dump(), "models_dir": str(tmp_path), "output_dir": str(tmp_path), "data": plan}
    progress: list[tuple[float, str]] = []
    result = evaluate({"model": choice.id, "max_new_tokens": 8}, context, lambda f, m: progress.append((f, m)))
    assert (result.rows_evaluated, result.rows_available) == (2, 2)  # 50 % of 3 rows
    rows = [json.loads(line) for line in (tmp_path / PREDICTIONS_FILE).read_text().splitlines()]
    references = [row["reference"] for row in rows]
    for side in ("tuned", "base"):
        answers = [row[f"{side}_answer"] for row in rows]
        assert any(answers), "no text was generated, so nothing was scored"
        scores = getattr(result, side)
        assert scores.wer == pytest.approx(jiwer.wer(references, answers), abs=1e-6)
        assert scores.cer == pytest.approx(jiwer.cer(references, answers), abs=1e-6)
        assert [row[f"wer_{side}"] for row in rows] == pytest.approx(
            [jiwer.wer(r, a) for r, a in zip(references, answers)]
        )
        assert (
            scores.loss > 0
            and scores.answer_tokens > 0
            and scores.generated_tokens == sum(row[f"{side}_tokens"] for row in rows)
        )
    assert result.tuned.loss != result.base.loss  # the adapter is on for tuned only
    assert {row["audio"] for row in rows} <= {"1.mp3", "2.wav", "3.flac"}
    assert all(row["prompt"].startswith("<audio>") for row in rows)
    per_row = [f for f, m in progress if " of 2 (loss and answer)" in m]
    assert len(per_row) == 4 and per_row == sorted(set(per_row))  # 2 rows x tuned and base, each a step
    labels = [line[0] for line in score_table(result.tuned, result.base)]
    assert {"loss", "perplexity", "WER", "CER"} <= set(labels) and "ROUGE-L F1" not in labels
    assert json.loads((tmp_path / SCORES_FILE).read_text())["tuned"]["cer"] == result.tuned.cer


def test_held_out_files_with_a_missing_clip_are_refused_before_a_model_loads(allowed, run, datasets_dir, tmp_path):
    from trainer_core.evaluation.sources import EvalDataError

    rows = json.loads((datasets_dir / "mllm_audio_demo.json").read_text())
    for row in rows:  # absolute: the file lies elsewhere
        row["audios"] = [str(datasets_dir / clip) for clip in row["audios"]]
    rows[1]["audios"] = [str(datasets_dir / "mllm_demo_data" / "missing.wav")]
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(rows), encoding="utf-8")
    with pytest.raises(EvalDataError, match="row 2"):
        plan_data(choice_for(str(run)), [str(bad)], None)
