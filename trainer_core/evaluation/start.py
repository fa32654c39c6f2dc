"""Start an evaluation as a background task: the one entry point for the API and the UI."""

from __future__ import annotations

from trainer_core.evaluation.schemas import EvaluateRequest
from trainer_core.evaluation.sources import EvalDataError, plan_data
from trainer_core.evaluation.worker import run_evaluation
from trainer_core.tasks.runner import TaskRefused, TaskRunner
from trainer_core.tasks.schemas import TaskKind, TaskRecord


def start_evaluation(tasks: TaskRunner, request: EvaluateRequest) -> TaskRecord:
    """Resolve ``request.model``, check its data (``sources.plan_data``: the named files confined to
    the allowed folders, present and readable; none named: the run's own evaluation data) and start
    ``worker.run_evaluation`` in a task worker. Returns the task's record at once. Raises TaskRefused:
    404 unknown model, 400 bad data or a model without weights (the message names ``datasets`` or
    the model and the fix), 409 while training or another task runs."""
    choice = tasks.resolve(request.model)
    try:
        plan = plan_data(choice, list(request.datasets), tasks.settings.allowed_roots)
    except EvalDataError as exc:
        raise TaskRefused(str(exc), 400, code=exc.code, fields=exc.fields) from None
    stored = request.model_dump(mode="json")
    return tasks.start(TaskKind.evaluate, choice, stored, run_evaluation, context={"data": plan})
