"""A full fine-tune of the tiny CSM through the worker's own ``train()`` (load, data, Trainer, save;
one step): the backbone and depth decoder change, the Mimi codec does not (frozen), the folder
holds the whole model and a processor that makes batches again; then, as a user would go on, its
merged export (the model's own weights re-saved, checked by reconstruction loss) and its
evaluation on files given (the base loaded beside it: the two losses differ)."""

from __future__ import annotations

import json
import queue
import threading

import pytest
import torch
from safetensors.torch import load_file

from tests.support.exports import run_export
from tests.support.speech_data import speech_request
from tests.support.tts_data import tts_file
from trainer_core.cli.chat import choice_for
from trainer_core.evaluation.sources import plan_data
from trainer_core.evaluation.worker import evaluate
from trainer_core.training.worker import train


def test_a_full_fine_tune_trains_all_but_the_codec_then_exports_and_evaluates(tiny_csm_dir, tmp_path):
    data = tts_file(tmp_path / "data")
    request = speech_request(tiny_csm_dir, data, training_type="full", max_steps=1, max_seq_length=512)
    run = tmp_path / "run"
    assert train(request, "job-tts-full", run, queue.Queue(), threading.Event()) == ("completed", None)
    (run / "request.json").write_text(json.dumps(request.public_dict()), encoding="utf-8")  # as the runner does
    before, after = load_file(tiny_csm_dir / "model.safetensors"), load_file(run / "model.safetensors")
    changed = {name.split(".")[0] for name in before if not torch.equal(before[name], after[name])}
    assert {"backbone_model", "depth_decoder"} <= changed and "codec_model" not in changed  # the codec frozen
    assert json.loads((run / "tokenizer.json").read_text())["padding"] is None  # no padding saved (collator)

    result, _ = run_export(run, tiny_csm_dir, "merged", tmp_path / "out", dtype="float32")
    assert result.passed and "Full fine-tune" in " ".join(result.notes), result.check.summary
    assert load_file(tmp_path / "out" / "model.safetensors").keys() == after.keys()

    choice = choice_for(str(run))
    assert choice.adapter is False
    plan = plan_data(choice, [str(data)], None)
    context = {"choice": choice.model_dump(), "models_dir": str(tmp_path), "output_dir": str(tmp_path), "data": plan}
    scores = evaluate({"model": choice.id, "max_rows": 1}, context)
    assert scores.rows_evaluated == 1 and scores.rows_available == 2
    assert scores.base is not None and scores.tuned.loss != pytest.approx(scores.base.loss, rel=1e-6)
