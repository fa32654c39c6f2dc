"""The training request, ``TrainingStartRequest``, shared by the engine, the UI, the CLI and the
HTTP API: composed here from its field groups (``trainer_core.request``), one module per concern,
with the cross-field rules of ``request.rules`` as its one model validator.

Every request field carries its description, default and bounds exactly once, in its group; the UI
builds its widgets and the CLI its flags from this metadata (``json_schema_extra["group"]`` says
which form section, ``request.sections``, a field belongs to).
"""

from __future__ import annotations

from typing import Any

from pydantic import ConfigDict, model_validator

from trainer_core.request.audio import AudioFields
from trainer_core.request.data import DataFields
from trainer_core.request.devices import DeviceFields
from trainer_core.request.embedding import EmbeddingFields
from trainer_core.request.hyperparameters import HyperparameterFields
from trainer_core.request.images import ImageFields
from trainer_core.request.lora import LoraFields
from trainer_core.request.method import MethodFields
from trainer_core.request.model import ModelFields
from trainer_core.request.output import OutputFields, TrackerFields
from trainer_core.request.rules import apply_rules

# Request fields that hold secrets: left out of public_dict (logs, run.json, the queue, settings files).
SECRET_FIELDS = ("hf_token", "wandb_token")


# The groups in reverse: pydantic orders the fields from the last base to the first, so the fields
# read model, method, data, embedding, hyperparameters, images, audio, LoRA, output, devices, trackers (the form's order).
class TrainingStartRequest(
    TrackerFields,
    DeviceFields,
    OutputFields,
    LoraFields,
    AudioFields,
    ImageFields,
    HyperparameterFields,
    EmbeddingFields,
    DataFields,
    MethodFields,
    ModelFields,
):
    """Everything one fine-tuning run needs. Field names follow the seed API; ``config.py`` maps
    ``batch_size``, ``num_epochs`` and ``max_seq_length`` to the transformers/TRL names.

    Raises ``pydantic.ValidationError`` naming the field for any value out of bounds or any
    contradictory combination (see ``trainer_core.request.rules``).
    """

    model_config = ConfigDict(extra="forbid", use_enum_values=False, allow_inf_nan=False, defer_build=False)

    @model_validator(mode="after")
    def _check_combinations(self) -> TrainingStartRequest:
        """The cross-field rules (``request.rules.RULES``), in order, after the groups' own validators."""
        apply_rules(self)
        return self

    def public_dict(self) -> dict[str, Any]:
        """The settings as plain JSON-able values with secrets removed (for logs, files, history)."""
        return self.model_dump(mode="json", exclude=set(SECRET_FIELDS))
