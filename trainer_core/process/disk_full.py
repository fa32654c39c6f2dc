"""A full disk, told apart from other write failures, with one message for the user.

A save that runs out of space surfaces differently per writer: ``OSError`` errno 28 (ENOSPC) or
122 (EDQUOT) from Python's own files, ``SafetensorError("... No space left on device (os error
28)")`` from safetensors, and from ``torch.save`` only ``RuntimeError("[enforce fail at
inline_container.cc] unexpected pos ...")`` with no errno at all. So a failed save counts as
"disk full" when the error (or one it was raised from) says so, or when it is a write error and the
folder it wrote into has almost no space left (``shutil.disk_usage(...).free``, the space an
unprivileged user may still use) — checked before the partial save is removed.
"""

from __future__ import annotations

import errno
import shutil
from pathlib import Path
from typing import Optional

FULL_ERRNOS = {errno.ENOSPC, errno.EDQUOT}
FULL_WORDS = ("no space left on device", "os error 28", "disk quota exceeded", "database or disk is full")
WRITE_WORDS = ("unexpected pos", "iostream error", "file write failed", "i/o error")
NEARLY_FULL_BYTES = 16 * 2**20  # below this a failed write is taken for a full disk


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
