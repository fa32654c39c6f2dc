"""The Runs table's rows (``ui.run_handlers``): the method cell names the model kind of a run that
trains no chat model (an embedding run: by its request, its run folder or its base model's folder)."""

from __future__ import annotations

from trainer_core.runs.records import RunRecord
from trainer_core.vocabulary import Phase
from ui.run_handlers import method_text, run_kind


def _run(tmp_path, **request) -> RunRecord:
    out = tmp_path / "job_1"
    out.mkdir(exist_ok=True)
    return RunRecord(job_id="job_1", created_at=0.0, phase=Phase.completed, request=request, output_dir=str(out))


def test_an_embedding_run_is_named_in_the_method_cell(tmp_path):
    text = _run(tmp_path, model_name="HuggingFaceTB/SmolLM2-135M", training_type="lora")
    assert run_kind(text) == "" and method_text(text.request, run_kind(text)) == "lora"
    flagged = _run(tmp_path, model_name="HuggingFaceTB/SmolLM2-135M", training_type="lora", is_embedding=True)
    assert method_text(flagged.request, run_kind(flagged)) == "embedding · lora"
    base = tmp_path / "bge"
    base.mkdir()
    (base / "modules.json").write_text("[]")  # a sentence-transformers folder: found from the model
    by_base = _run(tmp_path, model_name=str(base), training_type="full", is_embedding=None)
    assert method_text(by_base.request, run_kind(by_base)) == "embedding · full"
    assert method_text({"training_type": "lora", "training_method": "dpo"}) == "dpo · lora"
