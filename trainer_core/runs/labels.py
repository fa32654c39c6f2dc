"""A run's user label (name, note) and the list filters of the Runs tab: limits, the status words,
and the checks ``RunStore.set_label`` / ``RunStore.list_runs`` apply (pure functions, no SQL)."""

from __future__ import annotations

import unicodedata
from typing import TYPE_CHECKING, Optional

from trainer_core.refusals import Refusal
from trainer_core.vocabulary import EndReason, Phase

if TYPE_CHECKING:  # the store imports this module
    from trainer_core.runs.records import RunRecord

NAME_MAX_CHARS = 80  # a run's editable name
NOTE_MAX_CHARS = 2000  # a run's editable note
# words a run's status can be filtered by (``status_word``): its phase, or why it ended where that says more
STATUS_WORDS = tuple(p.value for p in Phase if p is not Phase.idle) + ("cancelled", "early_stopped")


def status_word(run: RunRecord) -> str:
    """The run's state in one of ``STATUS_WORDS``: its phase, except ``cancelled`` for a stopped
    run that was cancelled (nothing saved) and ``early_stopped`` for one ended by early stopping."""
    if run.phase is Phase.stopped and run.end_reason is EndReason.cancelled:
        return "cancelled"
    if run.end_reason is EndReason.early_stopped:
        return "early_stopped"
    return run.phase.value


def matches(run: RunRecord, name: Optional[str], status: Optional[str], dataset: Optional[str]) -> bool:
    """Whether ``run`` passes the filters of ``RunStore.list_runs``: ``name`` is contained in its
    name or job id, ``status`` equals its ``status_word``, ``dataset`` is contained in one of its
    dataset paths or its Hub dataset id (text filters ignore case; None or "" is no filter)."""
    if name and name.casefold() not in f"{run.name or ''}\n{run.job_id}".casefold():
        return False
    if status and status_word(run) != status:
        return False
    if dataset:
        sources = [*(run.request.get("local_datasets") or []), run.request.get("hf_dataset") or ""]
        return any(dataset.casefold() in str(s).casefold() for s in sources)
    return True


def label_text(field: str, text: str, limit: int) -> Optional[str]:
    """``text`` stripped (None when blank) for label ``field`` ("name" or "note"); a ``Refusal``
    (code ``invalid_label``, status 422) naming the field when it is longer than ``limit`` characters or holds a control character (a
    note may hold line breaks and tabs, a name may not)."""
    text = text.strip()
    if len(text) > limit:
        raise Refusal(f"{field} is {len(text)} characters long; at most {limit} are allowed", **_invalid(field))
    allowed = "" if field == "name" else "\n\t"
    # Cc: controls (C0, DEL, C1 such as U+0085), Cf: format characters (U+202E right-to-left override,
    # zero-width ones) that make one name look like another, Zl / Zp: line and paragraph separators.
    if any(c not in allowed and unicodedata.category(c) in ("Cc", "Cf", "Zl", "Zp") for c in text):
        raise Refusal(
            f"{field} holds a control or invisible formatting character"
            + ("" if allowed else " (a line break?): keep it to one line"),
            **_invalid(field),
        )
    return text or None


def _invalid(field: str) -> dict:
    """The refusal's fields, code and status for a bad ``field`` label."""
    return {"fields": (field,), "code": "invalid_label", "status": 422}
