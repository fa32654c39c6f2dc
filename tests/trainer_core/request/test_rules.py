"""The request's cross-field rules: named functions with their rule in a docstring, run in one fixed
order (the first broken rule is the refusal), each testable on its own."""

import pytest
from pydantic import ValidationError

from trainer_core.request import device_rules, rules
from trainer_core.schemas import TrainingStartRequest
from trainer_core.vocabulary import TrainingMethod

DATA = {"local_datasets": ["data.json"]}


def bare(**fields) -> TrainingStartRequest:
    """A request with ``fields`` and no validation at all (each rule is then checked alone)."""
    return TrainingStartRequest.model_construct(**{**DATA, **fields})


def test_every_rule_is_named_and_says_its_rule():
    assert len({rule.__name__ for rule in rules.RULES}) == len(rules.RULES) == 35
    assert all(rule.__doc__ and len(rule.__doc__.split()) >= 5 for rule in rules.RULES)
    assert set(device_rules.DEVICE_RULES) < set(rules.RULES)


def test_the_first_broken_rule_is_the_refusal():
    with pytest.raises(ValidationError) as info:
        TrainingStartRequest(local_datasets=[], warmup_steps=5, warmup_ratio=0.1, packing=True, training_method="dpo")
    assert [e["msg"] for e in info.value.errors()] == ["Value error, set either warmup_steps or warmup_ratio, not both"]
    assert rules.RULES.index(rules.one_warmup) < rules.RULES.index(rules.has_training_data)


@pytest.mark.parametrize(
    "rule, fields, message",
    [
        (rules.some_training, {"num_epochs": 0, "max_steps": 0}, "num_epochs and max_steps are both 0"),
        (rules.one_warmup, {"warmup_steps": 1, "warmup_ratio": 0.5}, "either warmup_steps or warmup_ratio"),
        (rules.has_training_data, {"local_datasets": [], "hf_dataset": None}, "no training data: give local_datasets"),
        (
            rules.grpo_groups_fill_batch,
            {"training_method": TrainingMethod.grpo, "batch_size": 3},
            r"multiple of num_generations \(4\)",
        ),
        (
            rules.beta_above_zero,
            {"training_method": TrainingMethod.dpo, "beta": 0},
            "beta must be above 0 for training_method dpo",
        ),
        (device_rules.ray_needs_address, {"compute": "ray"}, "compute ray needs ray_address"),
        (device_rules.node_rank_below_nodes, {"num_nodes": 2, "node_rank": 2}, "node_rank 2 is not below num_nodes 2"),
    ],
)
def test_a_rule_alone_refuses_naming_its_fields(rule, fields, message):
    with pytest.raises(ValueError, match=message):
        rule(bare(**fields))


def test_rules_that_complete_a_setting():
    request = bare(use_lora=False)
    rules.use_lora_agrees(request)
    assert request.training_type.value == "full"
    request = bare(training_method=TrainingMethod.grpo)
    rules.method_defaults(request)
    assert (request.learning_rate, request.beta) == (2e-4, 0.04)
    request = bare(compute="ray", num_workers=3)
    device_rules.ray_processes_are_workers(request)
    assert request.num_processes == 3


@pytest.mark.parametrize(
    "files, hub, missing",
    [([], None, True), ([], "  ", True), (["a.json"], None, False), ([], "org/name", False), (None, "", True)],
)
def test_training_data_missing_is_one_rule_for_every_door(files, hub, missing):
    problem = rules.training_data_missing(files, hub, "give --dataset FILE")
    assert problem == ("no training data: give --dataset FILE" if missing else None)


def test_no_training_data_is_said_once_and_every_door_says_it():
    from tests.support.sources import string_literals

    said = {path for path, text in string_literals() if "no training data" in text}
    assert said == {"trainer_core/request/rules.py"}
    with pytest.raises(ValidationError, match="no training data: give local_datasets"):
        TrainingStartRequest()


@pytest.mark.parametrize("method", list(TrainingMethod))
def test_a_methods_defaults_are_read_from_one_table(method):
    from trainer_core.configs.commands import changed_settings
    from trainer_core.fieldmeta import method_default

    request = TrainingStartRequest(**DATA, training_method=method)
    for name in ("learning_rate", "beta", "lora_r", "batch_size"):
        assert getattr(request, name) == method_default(name, method.value)  # what the form and preview compare to
    assert set(changed_settings(request.public_dict())) == {"local_datasets", "training_method"} - (
        {"training_method"} if method == TrainingMethod.sft else set()
    )


def test_the_method_defaults_table_is_read_by_the_request_and_fieldmeta_alone():
    from tests.support.sources import names_used

    assert names_used("METHOD_DEFAULTS") == {
        "trainer_core/vocabulary.py",
        "trainer_core/fieldmeta.py",
        "trainer_core/request/rules.py",
    }
