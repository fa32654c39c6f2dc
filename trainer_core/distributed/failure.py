"""Which process of a group failed first, from the launcher's own account.

When a process fails, torchrun (also under ``accelerate launch``) ends the others and prints a
summary whose "Root Cause (first observed failure)" block names the rank and its exit code
(``torch.distributed.elastic.multiprocessing.errors.ChildFailedError.format_msg``, torch 2.x):

    Root Cause (first observed failure):
    [0]:
      time      : 2026-12-02_05:02:52
      host      : localhost
      rank      : 1 (local_rank: 1)
      exitcode  : -9 (pid: 31078)  (SIGKILL)

Its "Failures:" block above lists the other processes that had failed by then. A process killed by
a signal leaves no error file, so torchrun times its failure when it notices it; a peer that raised
meanwhile (gloo's "Connection closed by peer") can then be named the root cause. ``killed_peer``
finds the killed process in that case: it failed first, and the peer's error follows from it.

Ray prints no such summary; its raylet says which worker process died, by pid, in the driver's
output (``ray_deaths``), e.g. (Ray 2.60, one line):

    (raylet) A worker died or was killed while executing a task by an unexpected system error. ...
    Worker PID: 9259 Worker exit type: SYSTEM_ERROR Worker exit detail: Worker unexpectedly exits
    with a connection error code 2. End of file. Some common causes include: ...
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

ROOT_CAUSE = "Root Cause (first observed failure)"
FAILURES = "Failures:"
PEER_LOST = re.compile(  # a collective's error when another process of the group went away
    r"Connection (?:closed|reset) by peer|remote worker crashing|remote process exited|Broken pipe", re.IGNORECASE
)
_RANK = re.compile(r"^\s*rank\s*:\s*(\d+)", re.MULTILINE)
_EXIT = re.compile(r"^\s*exitcode\s*:\s*(-?\d+)", re.MULTILINE)
_RAY_DEATH = re.compile(
    r"A worker died or was killed.*?Worker PID: (\d+)(?:.*?Worker exit detail: (.*?\.)(?: |$))?", re.MULTILINE
)
TAIL_BYTES = 64_000
ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")  # terminal colours (Ray's log prefixes), kept out of messages


@dataclass(frozen=True)
class RootCause:
    """The first process to fail: its global ``rank`` and ``exitcode`` (negative: killed by that signal)."""

    rank: int
    exitcode: int


def root_cause(text: str) -> Optional[RootCause]:
    """The root cause in a launcher's output ``text``, or None when it holds no such summary."""
    at = text.rfind(ROOT_CAUSE)
    if at < 0:
        return None
    block = text[at:]
    rank, exitcode = _RANK.search(block), _EXIT.search(block)
    if rank is None or exitcode is None:
        return None
    return RootCause(int(rank.group(1)), int(exitcode.group(1)))


def failures(text: str) -> list[RootCause]:
    """Every failure in the launcher's last summary in ``text`` (its "Failures:" block, then its root
    cause), [] when it holds none."""
    at = text.rfind(ROOT_CAUSE)
    if at < 0:
        return []
    start = text.rfind(FAILURES, 0, at)
    block = text[start if start >= 0 else at :]
    found = []
    for part in re.split(r"^\s*\[\d+\]:\s*$", block, flags=re.MULTILINE)[1:]:
        rank, exitcode = _RANK.search(part), _EXIT.search(part)
        if rank is not None and exitcode is not None:
            found.append(RootCause(int(rank.group(1)), int(exitcode.group(1))))
    return found


def killed_peer(text: str, cause: RootCause, message: str) -> Optional[RootCause]:
    """The process killed by a signal (a negative exit code other than SIGTERM's, which the launcher
    sends when it ends the others) that ``cause`` lost when ``message``, its error, says a peer went
    away (``PEER_LOST``); None otherwise."""
    if not PEER_LOST.search(message or ""):
        return None
    killed = [f for f in failures(text) if f.rank != cause.rank and f.exitcode < 0 and f.exitcode != -15]
    return killed[0] if killed else None


def ray_deaths(text: str) -> list[tuple[int, str]]:
    """The worker processes Ray's raylet reported dead in ``text``, first first: ``(pid, detail)``
    with the exit detail's first sentence ("" when none was given)."""
    return [(int(m.group(1)), (m.group(2) or "").strip()) for m in _RAY_DEATH.finditer(text)]


def log_tail(path: Path, size: int = TAIL_BYTES) -> str:
    """The last ``size`` bytes of the launcher's log as text ("" when it cannot be read)."""
    try:
        with path.open("rb") as fh:
            fh.seek(0, 2)
            fh.seek(max(0, fh.tell() - size))
            return fh.read().decode("utf-8", errors="replace")
    except OSError:
        return ""


def last_lines(text: str, count: int = 5, chars: int = 800) -> str:
    """The last ``count`` non-empty lines of ``text``, at most ``chars`` characters, without terminal
    colour codes, for a message."""
    lines = [ANSI.sub("", line).rstrip() for line in text.splitlines() if line.strip()]
    return " | ".join(lines[-count:])[-chars:]


def resume_hint(run_folder: Path) -> str:
    """ " Its last checkpoint, checkpoint-N, can be resumed (Resume from checkpoint)." when
    ``run_folder`` holds one, else "" (for the message of a run that failed)."""
    saved = [p for p in Path(run_folder).glob("checkpoint-*") if p.name.split("-")[-1].isdigit()]
    if not saved:
        return ""
    last = max(saved, key=lambda p: int(p.name.split("-")[-1]))
    return f" Its last checkpoint, {last.name}, can be resumed (Resume from checkpoint)."


def launcher_ended(launcher: str, code: Optional[int], log_text: str) -> str:
    """Why a run ended when its launcher (``launcher``: torchrun, accelerate launch, Ray Train) exited
    with ``code`` before the training ended, no process having failed first: its last log lines."""
    tail = last_lines(log_text)
    return (
        f"{launcher} exited with code {code} before the training ended"
        + (f": {tail}" if tail else "")
        + ". See launcher.log in the run folder."
    )


def results_not_copied(launcher: str, code: Optional[int], log_text: str) -> str:
    """Why a ``ray_storage_path`` run that trained to its end is an error: its driver exited with
    ``code`` without copying the results from the storage into the run folder."""
    tail = last_lines(log_text, count=2)
    return (
        f"The training ended, but the results were not copied from ray_storage_path into the run "
        f"folder ({launcher} exited with code {code}{': ' + tail if tail else ''}); see launcher.log"
    )


def first_ray_death(text: str, pids: dict[int, int], said_bye: set[int]) -> Optional[tuple[int, str]]:
    """(rank, exit detail) of the first of a group's processes (``pids``: rank -> pid) that Ray's
    raylet reported dead in ``text`` (``ray_deaths``) without having said goodbye (a killed worker;
    a process that failed with an error says goodbye first), or None."""
    ranks = {pid: rank for rank, pid in pids.items() if rank not in said_bye}
    return next(((ranks[pid], detail) for pid, detail in ray_deaths(text) if pid in ranks), None)
