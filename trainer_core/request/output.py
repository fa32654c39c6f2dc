"""Where a run's results go: its folder and the checkpoint it resumes from (``OutputFields``), and the
trackers it reports its losses to, with the seed API's tracker fields (``TrackerFields``)."""

from __future__ import annotations

import re
from typing import Optional

from pydantic import Field, SecretStr, field_validator, model_validator

from trainer_core.refusals import Refusal
from trainer_core.request.base import MAX_PATH_CHARS, FieldGroup, blank_is_none, in_section
from trainer_core.vocabulary import Tracker

WANDB_PROJECT = re.compile(r"[A-Za-z0-9_.-]{1,128}")
# (report_to name, the seed API's switch, the seed's settings that imply it)
SEED_TRACKERS = (
    ("tensorboard", "enable_tensorboard", ("tensorboard_dir",)),
    ("wandb", "enable_wandb", ("wandb_project", "wandb_token")),
)


class OutputFields(FieldGroup):
    """The run's folder and the checkpoint it continues from (section ``output``)."""

    output_dir: Optional[str] = Field(
        None,
        max_length=MAX_PATH_CHARS,
        description="A new or empty folder for checkpoints and the result; empty: <data dir>/runs/<job id>.",
        json_schema_extra=in_section("output"),
    )
    resume_from_checkpoint: Optional[str] = Field(
        None,
        max_length=MAX_PATH_CHARS,
        description="Checkpoint folder to continue from.",
        json_schema_extra=in_section("output"),
    )

    @field_validator("output_dir", "resume_from_checkpoint")
    @classmethod
    def _blank_output_paths(cls, value: Optional[str]) -> Optional[str]:
        return blank_is_none(value)


class TrackerFields(FieldGroup):
    """The trackers (section ``output``): ``report_to``, and the seed API's switches and settings
    that ``_map_seed_trackers`` maps onto it."""

    report_to: list[Tracker] = Field(
        default_factory=list,
        max_length=4,
        title="Report to (trackers)",
        description="Also log the losses to these trackers (none: only the studio's own charts and metrics.jsonl). Files stay in the run folder: tensorboard -> tensorboard/ (event files), trackio -> trackio/ (its local store), wandb -> wandb/ (offline mode when wandb.ai cannot be reached; sync later with `wandb sync`), mlflow -> mlruns/ (unless MLFLOW_TRACKING_URI is set). Each needs its package installed on the server.",
        json_schema_extra=in_section("output"),
    )

    # The seed API's tracker fields, accepted as it sends them and mapped onto report_to
    # (``_map_seed_trackers``); not on the form, which has report_to.
    enable_tensorboard: Optional[bool] = Field(
        None,
        title="Enable TensorBoard",
        description="The seed API's switch: true adds tensorboard to report_to; false must agree with it.",
        json_schema_extra=in_section("output", form=False),
    )
    tensorboard_dir: Optional[str] = Field(
        None,
        max_length=MAX_PATH_CHARS,
        title="TensorBoard folder",
        description="Where TensorBoard writes its event files: inside the run folder, or a new or empty folder in the allowed folders that obeys output_dir's rules (the run claims it; Delete removes its files); empty: <run folder>/tensorboard. Adds tensorboard to report_to.",
        json_schema_extra=in_section("output", form=False),
    )
    enable_wandb: Optional[bool] = Field(
        None,
        title="Enable Weights & Biases",
        description="The seed API's switch: true adds wandb to report_to; false must agree with it.",
        json_schema_extra=in_section("output", form=False),
    )
    wandb_project: Optional[str] = Field(
        None,
        max_length=128,
        title="W&B project",
        description="The Weights & Biases project of the run (letters, digits, '-', '_', '.'); empty: WANDB_PROJECT on the server, else finetune-studio. Adds wandb to report_to.",
        json_schema_extra=in_section("output", form=False),
    )
    wandb_token: Optional[SecretStr] = Field(
        None,
        max_length=512,
        title="W&B API key",
        description="Weights & Biases API key for this run only (given to its worker as WANDB_API_KEY); empty: the server's own login. Never logged or stored. Adds wandb to report_to.",
        json_schema_extra=in_section("output", form=False),
    )

    @field_validator("tensorboard_dir")
    @classmethod
    def _blank_tensorboard_dir(cls, value: Optional[str]) -> Optional[str]:
        return blank_is_none(value)

    @field_validator("wandb_project")
    @classmethod
    def _project_name(cls, value: Optional[str]) -> Optional[str]:
        if not value or not value.strip():
            return None
        if not WANDB_PROJECT.fullmatch(value.strip()):
            raise ValueError(f"'{value[:40]}' is not a project name: use letters, digits, '-', '_' and '.'")
        return value.strip()

    @field_validator("wandb_token")
    @classmethod
    def _blank_key_is_none(cls, value: Optional[SecretStr]) -> Optional[SecretStr]:
        return value if value is not None and value.get_secret_value().strip() else None

    @field_validator("report_to")
    @classmethod
    def _trackers_once(cls, value: list[str]) -> list[str]:
        return list(dict.fromkeys(value))  # a tracker named twice is one tracker

    @model_validator(mode="after")
    def _map_seed_trackers(self) -> TrackerFields:
        """enable_tensorboard / tensorboard_dir and enable_wandb / wandb_project / wandb_token (the
        seed API's) onto ``report_to``: a switch set true, or a setting given, adds the tracker;
        a switch set false with the tracker asked for another way is refused. Runs before the
        request's cross-field rules (``rules.RULES``)."""
        for tracker, switch, settings in SEED_TRACKERS:
            on = getattr(self, switch)
            given = [name for name in settings if getattr(self, name) is not None]
            if on is False and (tracker in self.report_to or given):
                other = f"report_to {tracker}" if tracker in self.report_to else given[0]
                raise Refusal(
                    f"{switch} false disagrees with {other}: set {switch} true, or drop {other}",
                    fields=(switch, "report_to" if tracker in self.report_to else given[0]),
                )
            if (on or given) and tracker not in self.report_to:
                self.report_to = [*self.report_to, tracker]
        return self
