"""A full disk, told apart from other write failures, with one message for the user.

A save that runs out of space surfaces differently per writer: ``OSError`` errno 28 (ENOSPC) or
122 (EDQUOT) from Python's own files, ``SafetensorError("... No space left on device (os error
28)")`` from safetensors, and from ``torch.save`` only ``RuntimeError("[enforce fail at
inline_container.cc] unexpected pos ...")`` with no errno at all. So a failed save counts as
"disk full" when the error (or one it was raised from) says so, or when it is a write error and the
folder it wrote into has almost no space left (``shutil.disk_usage(...).free``, the space an
unprivileged user may still use) — checked before the partial save is removed.

A small write that finds the disk full (a run's name, a share link, a queued job, a task's record:
SQLite's "database or disk is full", or ENOSPC from a file) changes nothing and is refused with
``storage_full_message``: the HTTP API answers it as 507 with ``DISK_FULL_CODE``, the page as a
notice (``storage_refusal`` tells such an error apart).
"""

from __future__ import annotations

import errno
import shutil
import sqlite3
from pathlib import Path
from typing import Optional

FULL_ERRNOS = {errno.ENOSPC, errno.EDQUOT}
FULL_WORDS = ("no space left on device", "os error 28", "disk quota exceeded", "database or disk is full")
WRITE_WORDS = ("unexpected pos", "iostream error", "file write failed", "i/o error")
NEARLY_FULL_BYTES = 16 * 2**20  # below this a failed write is taken for a full disk
DISK_FULL_CODE = "disk_full"  # the stable code of a write refused for a full disk (HTTP 507)


class DiskFullError(OSError):
    """A save ran out of disk space; the message says what could not be written, where, what was
    kept and how to go on."""

    def __init__(self, message: str) -> None:
        super().__init__(errno.ENOSPC, message)

    def __str__(self) -> str:
        return str(self.strerror)


def free_bytes(folder: Path) -> Optional[int]:
    """Bytes an unprivileged user may still write on ``folder``'s file system (its nearest existing
    parent's), or None when it cannot be read."""
    folder = Path(folder)
    while not folder.exists() and folder != folder.parent:
        folder = folder.parent
    try:
        return shutil.disk_usage(folder).free
    except OSError:
        return None


def _chain(exc: BaseException) -> list[BaseException]:
    seen: list[BaseException] = []
    while exc is not None and exc not in seen and len(seen) < 20:
        seen.append(exc)
        exc = exc.__cause__ or exc.__context__
    return seen


def is_disk_full(exc: BaseException, folder: Optional[Path] = None) -> bool:
    """True when ``exc`` (or an error in its chain) is a full disk: ENOSPC / EDQUOT, the words of
    one, or a write error while ``folder`` has under ``NEARLY_FULL_BYTES`` free (see the module
    docstring for why the last is needed)."""
    chain = _chain(exc)
    if any(isinstance(e, DiskFullError) or (isinstance(e, OSError) and e.errno in FULL_ERRNOS) for e in chain):
        return True
    if any(getattr(e, "sqlite_errorcode", None) == sqlite3.SQLITE_FULL for e in chain):
        return True
    # a data error may quote a row that says "no space left on device": only writers' errors count
    texts = [str(e).lower() for e in chain if not isinstance(e, (ValueError, KeyError, TypeError))]
    if any(word in text for text in texts for word in FULL_WORDS):
        return True
    if folder is None or not any(word in text for text in texts for word in WRITE_WORDS):
        return False
    free = free_bytes(folder)
    return free is not None and free < NEARLY_FULL_BYTES


def _size(n: Optional[int]) -> str:
    return "unknown" if n is None else f"{n / 2**20:.1f} MiB"


def disk_full_message(what: str, folder: Path, kept: str, then: str) -> str:
    """``Disk full: <what> could not be written to <folder> (<free> free there). <kept>. Free some
    space ..., then <then>.``"""
    return (
        f"Disk full: {what} could not be written to {folder} ({_size(free_bytes(folder))} free there after the "
        f"partial files were removed). {kept}. Free some space on that disk (or choose a folder on another disk), "
        f"then {then}."
    )


def storage_full_message(folder: Optional[Path]) -> str:
    """The refusal of a write that found the disk full: nothing was saved, how much is free where,
    what to free, and to try again."""
    where = "" if folder is None else f" The disk holding {folder} has {_size(free_bytes(folder))} free."
    return (
        f"Disk full: nothing was saved.{where} Free some space on it (delete runs, exports or uploads you no "
        "longer need, in the Runs tab or the data folder, or other files on that disk), then try again."
    )


def storage_refusal(exc: BaseException, folder: Optional[Path] = None) -> Optional[str]:
    """``storage_full_message`` when ``exc`` is a full disk (``is_disk_full``), naming the folder of
    the file it failed to write (else ``folder``, e.g. the data dir that holds the run history);
    None for any other error."""
    if not is_disk_full(exc, folder):
        return None
    named = next((e.filename for e in _chain(exc) if isinstance(e, OSError) and isinstance(e.filename, str)), None)
    return storage_full_message(Path(named).parent if named else folder)
