"""The dataset push request: its private default and token help are the model push's (one place),
unknown fields and short repo ids are refused naming the field, and the token is a secret."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from trainer_core.export.schemas import PushRequest
from trainer_core.recipes.push_request import DatasetPushRequest


def test_the_shared_fields_read_the_model_push():
    fields, model = DatasetPushRequest.model_fields, PushRequest.model_fields
    assert fields["private"].default is model["private"].default is True
    assert fields["token"].description == model["token"].description


def test_refusals_name_the_field_and_the_token_is_hidden():
    with pytest.raises(ValidationError) as short:
        DatasetPushRequest(result="qa-1", repo_id="x")
    assert [e["loc"] for e in short.value.errors()] == [("repo_id",)]
    with pytest.raises(ValidationError):
        DatasetPushRequest(result="qa-1", repo_id="me/qa", extra=1)
    body = DatasetPushRequest(result="qa-1", repo_id="me/qa", token="hf_secret0")
    assert "hf_secret0" not in repr(body) and "hf_secret0" not in body.model_dump_json()
