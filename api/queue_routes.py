"""The job queue under ``/api/train/queue``: add (same body as ``/start``), list, remove, reorder.

Thin routes over the app's ``JobQueue`` (``trainer_core.queue``); the same bearer token as the rest
of the training API. A queued request is checked as a Start is (a 400 names the field) and again
when its turn comes.
"""

from __future__ import annotations

from fastapi import APIRouter, Depends, Path, Request
from pydantic import BaseModel, ConfigDict, Field

from api.auth import require_token
from trainer_core.queue.dispatcher import JobQueue
from trainer_core.queue.store import MAX_ENTRIES, QueueEntry
from trainer_core.refusals import Refusal
from trainer_core.schemas import TrainingStartRequest
from trainer_core.vocabulary import WholeNumber

router = APIRouter(prefix="/api/train/queue", tags=["queue"], dependencies=[Depends(require_token)])
QUEUE_ID = Path(..., pattern=r"^q_[0-9]{1,12}_[0-9a-f]{8}$", description="A queue entry's id (q_<time>_<8 hex>).")


class MoveRequest(BaseModel):
    """``position``: the entry's new 1-based place among the waiting jobs (past the end: last)."""

    model_config = ConfigDict(extra="forbid")
    position: WholeNumber = Field(..., ge=1, le=MAX_ENTRIES)


class RemovedResponse(BaseModel):
    """The entry is gone from the queue."""

    removed: str


def _queue(request: Request) -> JobQueue:
    return request.app.state.queue


@router.post(
    "",
    response_model=QueueEntry,
    responses={
        400: {"description": "A path, output folder, model, dataset or setting that cannot be used"},
        409: {"description": "The queue is full"},
    },
)
def add(body: TrainingStartRequest, queue: JobQueue = Depends(_queue)) -> QueueEntry:
    """Check the request as ``/start`` does and queue it: it starts when every job before it has
    ended (completed, stopped or error), at once when the machine is free. The token (``hf_token``)
    is kept in memory only; everything else is stored and survives a restart. A refusal is a 400
    naming the fields, a full queue a 409 (``api.errors``)."""
    return queue.add(body)


@router.get("", response_model=list[QueueEntry])
def entries(queue: JobQueue = Depends(_queue)) -> list[QueueEntry]:
    """Waiting jobs in the order they will run (``position`` 1 next), then refused or interrupted
    ones with their ``error``."""
    return queue.entries()


@router.delete("/{queue_id}", response_model=RemovedResponse, responses={404: {"description": "No such entry"}})
def remove(queue_id: str = QUEUE_ID, queue: JobQueue = Depends(_queue)) -> RemovedResponse:
    """Take a job out of the queue (a job already started is a run: stop it with ``/stop``)."""
    if not queue.remove(queue_id):
        raise Refusal(
            f"no queued job {queue_id} (it may have started: see /api/train/status)",
            fields=("queue_id",),
            code="unknown_queue_entry",
            status=404,
        )
    return RemovedResponse(removed=queue_id)


@router.post("/{queue_id}/move", response_model=QueueEntry, responses={404: {"description": "No such waiting entry"}})
def move(body: MoveRequest, queue_id: str = QUEUE_ID, queue: JobQueue = Depends(_queue)) -> QueueEntry:
    """Reorder: put a waiting job at ``position`` (1 = next to run)."""
    moved = queue.move(queue_id, body.position)
    if moved is None:
        raise Refusal(
            f"no waiting job {queue_id} in the queue", fields=("queue_id",), code="unknown_queue_entry", status=404
        )
    return moved
