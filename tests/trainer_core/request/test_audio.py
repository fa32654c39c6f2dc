"""The audio fields: defaults, bounds and blanks, as the form, API, CLI and YAML send them."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from trainer_core.fieldmeta import group
from trainer_core.request.audio import DEFAULT_MAX_SECONDS, MAX_AUDIO_SECONDS, AudioFields
from trainer_core.schemas import TrainingStartRequest

DATA = {"local_datasets": ["data.json"]}


def test_defaults_are_off_and_the_openers_limit():
    request = TrainingStartRequest(**DATA)
    assert request.is_dataset_audio is None and request.sampling_rate is None
    assert request.max_audio_seconds == DEFAULT_MAX_SECONDS and request.return_timestamps is False
    assert (request.language, request.task, request.speaker_column) == (None, None, None)
    assert group("is_dataset_audio") == "data"
    assert {group(name) for name in AudioFields.model_fields} - {"data"} == {"audio"}


def test_bounds_and_blanks():
    assert TrainingStartRequest(**DATA, language="  ").language is None
    assert TrainingStartRequest(**DATA, speaker_column=" ").speaker_column is None
    assert TrainingStartRequest(**DATA, task="translate", language="de").task == "translate"
    for bad in ({"sampling_rate": 4000}, {"max_audio_seconds": 0}, {"max_audio_seconds": MAX_AUDIO_SECONDS + 1},
                {"task": "summarize"}, {"sampling_rate": True}):  # fmt: skip
        with pytest.raises(ValidationError) as info:
            TrainingStartRequest(**DATA, **bad)
        assert [e["loc"] for e in info.value.errors()] == [(next(iter(bad)),)]
