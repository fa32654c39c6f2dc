"""Request validation: good requests, bounds, cross-field rules, secrets."""

import pytest
from pydantic import ValidationError

from trainer_core.request.model import DEFAULT_MODEL
from trainer_core.schemas import TrainingStartRequest
from trainer_core.status import new_job_id
from trainer_core.vocabulary import Phase, TrainingType

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


def _int_fields(model) -> list[str]:
    from trainer_core.fieldmeta import base_type

    return [name for name, info in model.model_fields.items() if base_type(info.annotation) is int]


def _request_bodies() -> list[tuple[type, dict]]:
    """Every request model a client fills, with the least it needs."""
    from api.openai_schemas import ChatCompletionRequest
    from api.queue_routes import MoveRequest
    from trainer_core.evaluation.schemas import EvaluateRequest
    from trainer_core.rewards.schemas import RewardSpec
    from trainer_core.serving.schemas import GenerationSettings

    return [
        (TrainingStartRequest, DATA),
        (RewardSpec, {"name": "length"}),
        (EvaluateRequest, {"model": "base", "datasets": ["held-out.json"]}),
        (GenerationSettings, {}),
        (ChatCompletionRequest, {"messages": [{"role": "user", "content": "hi"}]}),
        (MoveRequest, {"position": 1}),
    ]


def test_every_integer_field_refuses_a_boolean_naming_the_field():
    checked = 0
    for model, least in _request_bodies():
        for name in _int_fields(model):
            with pytest.raises(ValidationError) as info:
                model.model_validate({**least, name: True})
            errors = info.value.errors()
            assert [e["loc"] for e in errors] == [(name,)], (model.__name__, name)
            assert "a whole number is needed here, not true or false" in errors[0]["msg"]
            checked += 1
    assert checked >= 30  # 20 of the training request's fields and the other bodies' own


def test_integer_fields_still_read_the_numbers_the_form_yaml_and_cli_send():
    for name in _int_fields(TrainingStartRequest):
        value = TrainingStartRequest.model_fields[name].default
        if value is None:  # a number inside the field's bounds
            value = max([64, *(getattr(m, "ge", 0) for m in TrainingStartRequest.model_fields[name].metadata)])
        for sent in (value, float(value), str(value)):  # JSON / YAML, a number box, a typed flag
            assert getattr(TrainingStartRequest(**DATA, **{name: sent}), name) == value, (name, sent)


@pytest.mark.parametrize(
    "name",
    [
        "output_dir",
        "resume_from_checkpoint",
        "adapter_name_or_path",
        "reward_file",
        "distributed_config",
        "tensorboard_dir",
    ],
)
def test_a_blank_path_is_not_set(name):
    for blank in ("", "  "):
        request = TrainingStartRequest(**DATA, **{name: blank})
        assert getattr(request, name) is None and request.public_dict()[name] is None


@pytest.mark.parametrize(
    "fields, message",
    [
        ({"train_split": "test"}, "train_split ('test') picks a part of a Hub dataset (hf_dataset); local files"),
        ({"eval_split": "validation"}, "eval_split ('validation') picks a part of a Hub dataset"),
        ({"subset": "en"}, "subset ('en') picks a part of a Hub dataset"),
        (
            {"hf_dataset": "org/data", "eval_split": "test", "local_eval_datasets": ["held.json"]},
            "eval_split ('test') and local_eval_datasets both name evaluation data",
        ),
    ],
)
def test_hub_parts_without_a_hub_dataset_are_refused(fields, message):
    assert message in _error(**fields)


def test_hub_parts_with_a_hub_dataset_and_the_forms_defaults_are_kept():
    assert TrainingStartRequest(**DATA, train_split="train", eval_split="", subset=" ").eval_split is None
    hub = TrainingStartRequest(hf_dataset="org/data", subset="en", train_split="train[:80%]", eval_split="test")
    assert (hub.subset, hub.train_split, hub.eval_split) == ("en", "train[:80%]", "test")


def test_the_help_text_says_each_methods_own_default_from_the_one_table():
    import re

    from trainer_core.vocabulary import METHOD_DEFAULTS, TrainingMethod, method_defaults_text

    for field in {field for field, _ in METHOD_DEFAULTS}:
        text = method_defaults_text(field)
        assert text in TrainingStartRequest.model_fields[field].description
        said = {}
        for names, value in re.findall(
            r"an? ([A-Z, ]+?(?: or [A-Z]+)?) run(?: that does not set it gets)? ([0-9.e-]+)", text
        ):
            for name in re.split(r", | or ", names):
                said[name.lower()] = float(value)
        for method in TrainingMethod:
            assert said.get(method.value) == METHOD_DEFAULTS.get((field, method.value)), (field, method, text)
    assert "a GRPO run 2e-4" in TrainingStartRequest.model_fields["learning_rate"].description  # the case


# The request's fields in order, by form section (as on main before the schema was split into field
# groups; then the embedding fields): the form, the CLI's flags, YAML files and fieldmeta.FIELDS follow this order.
FIELD_ORDER = [
    ("model", ["model_name", "training_type", "trust_remote_code", "use_lora", "load_in_4bit", "max_seq_length", "hf_token"]),
    ("method", ["training_method", "beta", "loss_type", "desirable_weight", "undesirable_weight", "num_generations",
                "max_completion_length", "temperature", "grpo_loss_type", "rewards", "reward_file", "adapter_name_or_path"]),
    ("data", ["hf_dataset", "local_datasets", "local_eval_datasets", "format_type", "default_chat_template",
              "custom_format_mapping", "subset", "train_split", "eval_split", "val_size", "eval_steps",
              "dataset_slice_start", "dataset_slice_end"]),
    ("model", ["is_embedding"]),
    ("embedding", ["embedding_loss", "embedding_columns", "matryoshka_dims", "query_prompt", "mini_batch_size"]),
    ("training", ["num_epochs", "max_steps", "learning_rate", "embedding_learning_rate", "batch_size",
                  "gradient_accumulation_steps", "warmup_steps", "warmup_ratio", "save_steps", "weight_decay",
                  "max_grad_norm", "random_seed", "packing", "optim", "lr_scheduler_type", "gradient_checkpointing",
                  "mixed_precision", "early_stopping_patience", "early_stopping_threshold", "stop_on_divergence",
                  "train_on_completions"]),
    ("data", ["is_dataset_image", "vision_image_size"]),
    ("data", ["is_dataset_audio"]),
    ("audio", ["sampling_rate", "max_audio_seconds", "language", "task", "return_timestamps", "speaker_column",
               "audio_codec"]),
    ("lora", ["lora_r", "lora_alpha", "lora_dropout", "target_modules", "modules_to_save", "use_loftq",
              "finetune_attention_modules", "finetune_language_layers", "finetune_vision_layers",
              "finetune_mlp_modules", "use_rslora"]),
    ("output", ["output_dir", "resume_from_checkpoint"]),
    ("distributed", ["num_processes", "gpu_ids", "num_nodes", "node_rank", "rdzv_endpoint", "distributed", "compute",
                     "ray_address", "num_workers", "resources_per_worker", "use_gpu", "ray_storage_path",
                     "distributed_config"]),
    ("output", ["report_to", "enable_tensorboard", "tensorboard_dir", "enable_wandb", "wandb_project", "wandb_token"]),
]  # fmt: skip


def test_field_order_and_sections_are_pinned():
    from trainer_core.fieldmeta import group

    names = [name for _, block in FIELD_ORDER for name in block]
    assert list(TrainingStartRequest.model_fields) == names and len(names) == 101
    assert list(TrainingStartRequest.model_json_schema()["properties"]) == names
    assert [(group(name), name) for name in names] == [(section, n) for section, block in FIELD_ORDER for n in block]
    assert TrainingStartRequest.model_config["extra"] == "forbid"
