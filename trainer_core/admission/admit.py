"""Everything a Start (from the UI, the API or a Runs-tab Resume) is checked against before it is
answered "queued": one function, so every door refuses the same things with the same words.

Each check is cheap (well under a second for data files of a few MB, about one second for a Hub
lookup, about two seconds to tokenize 1,000 Alpaca rows); what needs the model's weights is left to
the worker. The data checks are the pre-flight check's (``preflight.check.start_issues``, run in the
check's worker process: ``admission.check_worker``), so Start refuses with the same messages as the
Check button.
"""

from __future__ import annotations

from pathlib import Path
from typing import Optional

from trainer_core.admission.request_paths import AdapterMissing, MissingPaths, checked_request
from trainer_core.data.files import DatasetError
from trainer_core.distributed.launch import ScalingError, check_config_file, machine_devices, machine_refusal
from trainer_core.models.hub import HubCheckError, check_hub_dataset, check_model, check_model_name
from trainer_core.paths import PathNotAllowed
from trainer_core.refusals import Refusal
from trainer_core.rewards.code_file import RewardCodeError
from trainer_core.runs.folders import OutputDirError
from trainer_core.runs.records import RunRecord
from trainer_core.runs.resume import ResumeError, find_resume_target
from trainer_core.runs.store import RunStore
from trainer_core.runs.write_folders import check_write_folders
from trainer_core.schemas import TrainingStartRequest
from trainer_core.settings import Settings


class PreflightError(Refusal):
    """The pre-flight check's errors (e.g. no trained token in the data); ``issues`` holds them
    (``preflight.report.Issue``), the message is theirs, joined, and the fields theirs, in order."""

    code = "preflight_failed"

    def __init__(self, issues: list) -> None:
        self.issues = list(issues)
        super().__init__(
            "; ".join(issue.message for issue in self.issues),
            fields=[name for issue in self.issues for name in issue.fields],
        )


# Every refusal of ``admit`` is one of these (all ``Refusal``s: message, fields, code).
REFUSALS = (
    PathNotAllowed,
    MissingPaths,
    AdapterMissing,
    OutputDirError,
    HubCheckError,
    ResumeError,
    DatasetError,
    PreflightError,
    ScalingError,
    RewardCodeError,
)


def admit(request: TrainingStartRequest, settings: Settings, store: Optional[RunStore]) -> TrainingStartRequest:
    """``request`` with every local path resolved and confined, after checking that it can start:
    paths inside the allowed folders and dataset files present; every folder it writes into
    (``output_dir``, ``tensorboard_dir``, ``ray_storage_path``) passing the output-folder rules
    (``runs.write_folders``: not a studio folder or another run's); a resume target a complete
    checkpoint of a resumable run; the model a Hub id that can be had or a model folder in the allowed folders;
    ``hf_dataset`` a Hub id that can be had; the processes and devices asked for present on this
    machine and a ``distributed_config`` of the right kind (``distributed.launch``); the local data files readable in a known layout and,
    when the model's tokenizer is on this machine, with a trained token (no weights are loaded).

    Raises one of ``REFUSALS``."""
    checked = checked_request(request, settings.allowed_roots)
    resumed = find_resume_target(store, checked.resume_from_checkpoint).run if checked.resume_from_checkpoint else None
    updates = check_write_folders(checked, settings, store, resumed)
    check_devices(checked)
    check_reward_code(checked, settings)
    token = checked.hf_token.get_secret_value() if checked.hf_token else None
    updates["model_name"] = check_model(checked.model_name, settings.model_roots, token)
    if checked.hf_dataset:
        check_hub_dataset(checked.hf_dataset, token)
    admitted = checked.model_copy(update=updates)
    from trainer_core.admission.check_worker import check_start_issues

    errors = check_start_issues(admitted, settings)  # in the check's worker process, never in the app's
    if errors:
        raise PreflightError(errors)
    return admitted


def checked_for_preflight(
    request: TrainingStartRequest, settings: Settings, store: Optional[RunStore] = None
) -> TrainingStartRequest:
    """``request`` with its paths confined as ``admit`` confines them, for the pre-flight check
    (which asks no Hub and starts nothing): dataset, output and resume paths in the allowed
    folders, every folder it writes into passing the output-folder rules against ``store``'s runs
    (``runs.write_folders``; a resume target is judged at Start), a model folder in the model
    folders with a config.json or a well-formed Hub id (``hub.check_model_name``, the offline half
    of Start's model check); the processes and devices
    present on this machine and the distributed config file of the right kind, as Start checks them.
    Raises PathNotAllowed, MissingPaths, OutputDirError, ScalingError or HubCheckError."""
    checked = checked_request(request, settings.allowed_roots)
    updates = check_write_folders(checked, settings, store, _resumed_run(store, checked))
    check_devices(checked)
    check_reward_code(checked, settings)
    updates["model_name"] = check_model_name(checked.model_name, settings.model_roots)
    return checked.model_copy(update=updates)


def _resumed_run(store: Optional[RunStore], request: TrainingStartRequest) -> Optional[RunRecord]:
    """The run ``request`` resumes, or None (also when its checkpoint cannot be resumed: Start says why)."""
    if not request.resume_from_checkpoint:
        return None
    try:
        return find_resume_target(store, request.resume_from_checkpoint).run
    except ResumeError:
        return None


def check_devices(request: TrainingStartRequest) -> None:
    """The processes and GPUs ``request`` asks for exist on this machine, and its
    ``distributed_config`` (already confined) is of the right kind. Raises ScalingError."""
    if refusal := machine_refusal(request, machine_devices()):
        raise refusal
    check_config_file(request)


def check_reward_code(request: TrainingStartRequest, settings: Settings) -> None:
    """A GRPO run's ``reward_file`` (already confined) is accepted only where the server sets
    ``allow_reward_code`` (``STUDIO_ALLOW_REWARD_CODE``), and must define the ``code`` rewards it
    names; it is parsed, never run, here. Raises RewardCodeError."""
    from trainer_core.rewards.build import code_function_names

    if request.reward_file or any(spec.name == "code" for spec in request.rewards):
        code_function_names(request, settings.allow_reward_code)


def default_run_folder(settings: Settings, job_id: str) -> Path:
    """Where a run without ``output_dir`` writes: ``<data dir>/runs/<job id>``."""
    return settings.runs_dir / job_id


__all__ = ["REFUSALS", "PreflightError", "admit", "default_run_folder"]
