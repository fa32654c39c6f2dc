"""What a push of a recipe's result folder to the Hub asks for (``POST /api/recipes/push`` and the
recipe panel's *Push*): kept apart from ``recipes.hub_push`` so the API
reads it without importing the recipe runner."""

from __future__ import annotations

from typing import Optional

from pydantic import BaseModel, ConfigDict, Field, SecretStr

from trainer_core.export.schemas import PushRequest

_PUSH = PushRequest.model_fields  # a model push's private / token fields: the same meaning here


class DatasetPushRequest(BaseModel):
    """Push a result folder to the Hub as a dataset repo (``POST /api/recipes/push`` and the recipe
    panel's *Push*). The token is used for this push only: never stored or logged."""

    model_config = ConfigDict(extra="forbid")
    result: str = Field(min_length=1, max_length=200, description="The recipe task id or result folder's name.")
    repo_id: str = Field(min_length=3, max_length=96, description="Hub dataset repository, owner/name.")
    private: bool = Field(_PUSH["private"].default, description=_PUSH["private"].description)
    token: Optional[SecretStr] = Field(None, max_length=400, description=_PUSH["token"].description)
