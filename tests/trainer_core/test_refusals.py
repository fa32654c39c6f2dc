"""``trainer_core.refusals``: every refusal class is a ``Refusal`` with a stable code, and a
pydantic error becomes one with the fields of its locations and of the rule that raised it."""

from __future__ import annotations

import pickle
import re

import pytest
from pydantic import ValidationError

from trainer_core.admission.admit import REFUSALS
from trainer_core.arena.battle import ArenaError, UnknownBattle
from trainer_core.configs.yaml_files import ConfigFileError
from trainer_core.evaluation.sources import EvalDataError
from trainer_core.export.job import ExportInputError
from trainer_core.queue.store import QueueFull
from trainer_core.refusals import INVALID_SETTING, Refusal, error_code, error_fields, from_validation
from trainer_core.schemas import TrainingStartRequest
from trainer_core.serving.errors import ChatInputError, ChatUnavailable, UnknownModel
from trainer_core.serving.share import ShareLinkError, UnknownShareLink
from trainer_core.tasks.runner import TaskRefused

EVERY_DOOR = (  # the refusal classes of each door: Start / Check / queue, tasks, arena, share links, chat, YAML
    *REFUSALS,
    ExportInputError,
    EvalDataError,
    TaskRefused,
    QueueFull,
    ArenaError,
    UnknownBattle,
    ShareLinkError,
    UnknownShareLink,
    ChatInputError,
    UnknownModel,
    ChatUnavailable,
    ConfigFileError,
)
SNAKE = re.compile(r"[a-z]+(_[a-z]+)*")


def _subclasses(cls: type) -> list[type]:
    return [sub for direct in cls.__subclasses__() for sub in (direct, *_subclasses(direct))]


def test_every_refusal_class_is_a_refusal_with_its_own_code_and_a_4xx():
    assert len(REFUSALS) == 10 and all(issubclass(cls, Refusal) for cls in EVERY_DOOR)
    classes = [cls for cls in _subclasses(Refusal) if cls.__module__.startswith("trainer_core.")]
    assert set(EVERY_DOOR) <= set(classes)
    for cls in classes:
        assert "code" in vars(cls), f"{cls.__name__} sets no code of its own"
        assert SNAKE.fullmatch(cls.code) and cls.code != INVALID_SETTING, (cls.__name__, cls.code)
        assert 400 <= cls.status < 500, (cls.__name__, cls.status)
    assert issubclass(ChatUnavailable, RuntimeError) and issubclass(UnknownShareLink, LookupError)  # old bases kept


def test_a_refusal_carries_its_message_fields_code_and_status_and_survives_a_pickle():
    refusal = Refusal("lora_alpha: too low for lora_r", fields=["lora_alpha", "lora_r", "lora_alpha"])
    assert str(refusal) == refusal.message == "lora_alpha: too low for lora_r" and isinstance(refusal, ValueError)
    assert refusal.fields == ("lora_alpha", "lora_r") and (refusal.code, refusal.status) == (INVALID_SETTING, 400)
    busy = TaskRefused("a task runs", 409)
    assert (busy.code, busy.status, busy.fields) == ("busy", 409, ())
    vote = ArenaError("voted already", code="already_voted", status=409)
    assert (vote.code, vote.status, ArenaError("x").code) == ("already_voted", 409, "arena_refused")
    copy = pickle.loads(pickle.dumps(Refusal("x", fields=["a"], code="some_code")))
    assert (str(copy), copy.fields, copy.code) == ("x", ("a",), "some_code")


def test_a_validation_error_is_a_refusal_with_the_fields_of_its_locations_and_rules():
    with pytest.raises(ValidationError) as invalid:
        TrainingStartRequest(local_datasets=["a.json"], learning_rate=5, lora_r=-1)
    refusal = from_validation(invalid.value)
    assert refusal.fields == ("learning_rate", "lora_r") and (refusal.code, refusal.status) == (INVALID_SETTING, 422)
    assert str(refusal).startswith("learning_rate: ") and "; lora_r: " in str(refusal)
    with pytest.raises(ValidationError) as both:  # a rule of the whole request: its own fields, its own code
        TrainingStartRequest(local_datasets=["a.json"], warmup_steps=5, warmup_ratio=0.1)
    assert [error_fields(e) for e in both.value.errors()] == [("warmup_steps", "warmup_ratio")]
    with pytest.raises(ValidationError) as hub:  # a field's own rule naming another field: both
        TrainingStartRequest(hf_dataset="json")
    assert [error_fields(e) for e in hub.value.errors()] == [("hf_dataset", "local_datasets")]
    assert from_validation(both.value).message.startswith("settings: ")
    with pytest.raises(ValidationError) as empty:
        TrainingStartRequest()
    assert [error_code(e) for e in empty.value.errors()] == ["no_training_data"]
    assert error_fields({"loc": ("body", "rewards", 0, "weight")}) == ("rewards",)  # FastAPI's location
    assert error_fields({"loc": ("body",)}) == () and error_code({"loc": ("x",)}) == INVALID_SETTING
