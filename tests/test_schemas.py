"""Request validation: good requests, bounds, cross-field rules, secrets."""

import pytest
from pydantic import ValidationError

from trainer_core.schemas import (
    DEFAULT_MODEL,
    Phase,
    TrainingStartRequest,
    TrainingType,
    new_job_id,
)

DATA = {"local_datasets": ["data.json"]}


def _error(**fields) -> str:
    with pytest.raises(ValidationError) as info:
        TrainingStartRequest(**{**DATA, **fields})
    return str(info.value)


def test_defaults_are_usable():
    request = TrainingStartRequest(**DATA)
    assert request.model_name == DEFAULT_MODEL
    assert request.training_type is TrainingType.lora
    assert request.target_modules == ["all-linear"]  # resolved in the loaded model (models.targets)
    assert request.finetune_attention_modules and request.finetune_mlp_modules
    assert request.learning_rate == 1e-3 and request.num_epochs == 3.0 and not request.load_in_4bit


def test_qlora_turns_on_4bit():
    assert TrainingStartRequest(**DATA, training_type="qlora").load_in_4bit is True


@pytest.mark.parametrize(
    "fields, needle",
    [
        ({"learning_rate": 0}, "learning_rate"),
        ({"learning_rate": 1.5}, "learning_rate"),
        ({"learning_rate": -1e-4}, "learning_rate"),
        ({"batch_size": 0}, "batch_size"),
        ({"lora_dropout": 1.0}, "lora_dropout"),
        ({"max_seq_length": 4}, "max_seq_length"),
        ({"num_epochs": 0, "max_steps": 0}, "num_epochs and max_steps are both 0"),
        ({"load_in_4bit": True}, "load_in_4bit is only used with training_type='qlora'"),
        (
            {"dataset_slice_start": 10, "dataset_slice_end": 5},
            "dataset_slice_end (5) must be after dataset_slice_start (10)",
        ),
        ({"warmup_steps": 10, "warmup_ratio": 0.1}, "either warmup_steps or warmup_ratio"),
        ({"training_type": "dora"}, "training_type"),
        ({"format_type": "xml"}, "format_type"),
        ({"optim": "adam"}, "optim"),
        ({"unknown_field": 1}, "unknown_field"),
    ],
)
def test_bad_requests_name_the_field(fields, needle):
    assert needle in _error(**fields)


def test_training_data_is_required():
    with pytest.raises(ValidationError, match="no training data"):
        TrainingStartRequest()


def test_token_is_never_echoed():
    request = TrainingStartRequest(**DATA, hf_token="hf_secret_value")
    assert "hf_secret_value" not in repr(request)
    assert "hf_secret_value" not in request.model_dump_json()
    assert "hf_token" not in request.public_dict()
    assert request.hf_token.get_secret_value() == "hf_secret_value"


def test_job_id_shape():
    from datetime import datetime

    job_id = new_job_id(datetime(2026, 11, 30, 14, 25, 1))
    assert job_id.startswith("job_20261130_142501_") and len(job_id) == len("job_20261130_142501_1a2b3c4d")
    assert new_job_id() != new_job_id()


def test_phases():
    assert [p.value for p in Phase] == [
        "idle",
        "loading_model",
        "loading_dataset",
        "configuring",
        "training",
        "completed",
        "error",
        "stopped",
        "interrupted",
    ]
