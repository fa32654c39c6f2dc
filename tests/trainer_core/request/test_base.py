"""The request's field groups: each a mixin with its own fields and validators, composed in the
form's order; a validator of one group never hides another's (pydantic keys them by name)."""

import pytest

from trainer_core.request.audio import AudioFields
from trainer_core.request.base import FieldGroup, in_section
from trainer_core.request.data import DataFields
from trainer_core.request.devices import DeviceFields
from trainer_core.request.embedding import EmbeddingFields
from trainer_core.request.hyperparameters import HyperparameterFields
from trainer_core.request.images import ImageFields
from trainer_core.request.lora import LoraFields
from trainer_core.request.method import MethodFields
from trainer_core.request.model import ModelFields
from trainer_core.request.output import OutputFields, TrackerFields
from trainer_core.schemas import TrainingStartRequest

GROUPS = (
    ModelFields,
    MethodFields,
    DataFields,
    EmbeddingFields,
    HyperparameterFields,
    ImageFields,
    AudioFields,
    LoraFields,
    OutputFields,
    DeviceFields,
    TrackerFields,
)  # the form's order
DATA = {"local_datasets": ["data.json"]}


def test_the_request_is_its_groups_fields_in_order():
    own = [name for group in GROUPS for name in group.model_fields]
    assert own == list(TrainingStartRequest.model_fields)
    assert all(issubclass(group, FieldGroup) for group in GROUPS)
    assert all(issubclass(TrainingStartRequest, group) for group in GROUPS)


def test_every_validator_of_every_group_runs():
    names = [name for group in GROUPS for name in group.__pydantic_decorators__.field_validators]
    assert len(names) == len(set(names)), "two groups name a field validator alike: the later hides the other"
    composed = TrainingStartRequest.__pydantic_decorators__.field_validators
    assert set(names) <= set(composed)


@pytest.mark.parametrize(
    "name",
    [
        "output_dir",
        "resume_from_checkpoint",
        "adapter_name_or_path",
        "reward_file",
        "distributed_config",
        "tensorboard_dir",
        "subset",
        "eval_split",
    ],
)
def test_a_blank_path_or_hub_part_is_unset_in_every_group(name):
    request = TrainingStartRequest(**DATA, **{name: "  "})
    assert getattr(request, name) is None and request.report_to == []


def test_a_group_names_a_known_section():
    assert in_section("lora") == {"group": "lora"}
    assert in_section("method", ("grpo",)) == {"group": "method", "methods": ["grpo"]}
    assert in_section("distributed", compute="ray") == {"group": "distributed", "compute": "ray"}
    with pytest.raises(KeyError, match="'hyperparameters' is not a form section"):
        in_section("hyperparameters")
