"""Refusals in the page's words: the refusal's fields are marked and their names become on-screen
labels (never a field guessed from the text), and the notice escapes what the user typed."""

import pytest
from pydantic import ValidationError

from trainer_core.admission.request_paths import MissingPaths
from trainer_core.refusals import Refusal
from trainer_core.schemas import TrainingStartRequest
from ui.refusals import describe, label_of, notice_html
from ui.refused import Refused


def test_field_names_become_labels_with_their_section():
    refusal = describe("max_seq_length: Input should be greater than or equal to 16", ["max_seq_length"])
    assert refusal.text == "Max seq length: Input should be greater than or equal to 16"
    assert refusal.fields == ("max_seq_length",) and refusal.element_ids == ("field-max_seq_length",)
    assert refusal.section_ids == ()  # always on screen
    assert describe("hf_token: bad", ["hf_token"]).section_ids == ("section-model",)  # in the closed Model options


def test_dataset_fields_name_both_widgets_and_sections_are_opened():
    refusal = describe(
        "settings: no training data: give local_datasets (files) or hf_dataset (a hub id)",
        ["local_datasets", "hf_dataset"],
    )
    assert refusal.text.startswith("no training data")
    assert "Training dataset" in refusal.text and "Hub dataset (Data options)" in refusal.text
    assert "local_datasets" not in refusal.text and "hf_dataset" not in refusal.text
    assert refusal.element_ids == ("train-upload", "train-paths", "field-hf_dataset")
    assert refusal.section_ids == ("section-data",)
    lr = describe("learning_rate: Input should be less than 1", ["learning_rate"])
    assert lr.text.startswith("Learning rate (Hyperparameters)") and lr.section_ids == ("section-training",)


def test_one_word_fields_only_where_used_as_a_field():
    packing = describe("packing: not with this model", ["packing"])
    assert packing.fields == ("packing",) and not packing.text.startswith("packing:")
    prose = describe("the subset of rows that fit", ["subset"])
    assert prose.text == "the subset of rows that fit" and prose.fields == ("subset",)  # marked, the prose kept
    upload = Refused("Training dataset (upload): this file was not uploaded to this server", fields=["local_datasets"])
    assert describe(upload).fields == ("local_datasets",)


def test_notice_escapes_user_text_and_lists_fields():
    html = notice_html(MissingPaths(["/data/<script>alert(1)</script>.json"]))
    assert "<script>" not in html and "&lt;script&gt;" in html
    assert 'data-fields="train-upload train-paths"' in html and html.startswith('<div class="refusal" role="alert"')
    assert label_of("lora_r") == "LoRA rank (lora_r)" and label_of("max_steps") == "Max steps"


def test_names_inside_paths_are_left_as_typed():
    refusal = describe(
        "file not found: /data/learning_rate/train_data.json (model_name.json)", ["learning_rate", "model_name"]
    )
    assert refusal.text == "file not found: /data/learning_rate/train_data.json (model_name.json)"


def test_the_fields_are_the_refusals_own_never_read_from_the_text():
    """A message that names fields marks nothing and keeps its words unless the refusal says so;
    a ``Refusal``, a ``Refused`` and a pydantic error bring their own fields; a field that is not
    on the Train form (an arena's ``models``) marks nothing."""
    plain = describe("learning_rate: Input should be less than 1")
    assert plain.fields == () and plain.text == "learning_rate: Input should be less than 1"
    engine = describe(Refusal("warmup_steps and warmup_ratio: set one", fields=("warmup_steps", "warmup_ratio")))
    assert engine.fields == ("warmup_steps", "warmup_ratio") and engine.text.startswith("Warmup steps (")
    assert describe(Refused("Max steps: 'x' is not a number", fields=["max_steps"])).fields == ("max_steps",)
    with pytest.raises(ValidationError) as invalid:
        TrainingStartRequest(local_datasets=["a.json"], lora_r=-1, packing=True, training_method="dpo")
    said = describe(invalid.value)
    assert said.fields == ("lora_r",) and said.text.startswith("LoRA rank (lora_r) (LoRA): ")
    assert describe(Refusal("models: name two different models", fields=("models",))).fields == ()


def test_a_refused_start_marks_the_fields_the_engine_named(tmp_path, datasets_dir):
    """The page's Start hands the admission's refusal itself to the notice: its fields are marked and
    their sections opened, with no field read from the message."""
    from trainer_core.runs.job import JobRunner
    from trainer_core.settings import Settings
    from ui.context import Context
    from ui.train_handlers import start_request

    settings = Settings(data_dir=tmp_path / "data", allowed_paths=str(datasets_dir))
    settings.data_dir.mkdir()
    ctx = Context(runner=JobRunner(runs_dir=settings.runs_dir), settings=settings)
    request = TrainingStartRequest(
        local_datasets=[str(datasets_dir / "identity.json")], output_dir=str(settings.data_dir), max_steps=2
    )
    [update] = list(start_request(ctx, request))
    notice = update[-1]
    assert 'data-fields="field-output_dir"' in notice and 'data-sections="section-output"' in notice
    assert "Not started:</strong> Output dir (Output): " in notice and ctx.runner.status().job_id is None
