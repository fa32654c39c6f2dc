"""The attacker's audit hook, kept as a test helper for future doors.

Put this folder on ``PYTHONPATH`` (``audit_env`` gives the variables) and every Python process
started with that environment (the app, its workers, forkservers and subprocesses) imports
``sitecustomize`` at start-up, which calls ``install``: a ``sys.addaudithook`` hook that appends one
JSON line per file write, delete, rename, link, ``mkdir`` and socket connect to the file named by
``STUDIO_AUDIT_LOG``. Each line: ``{"pid", "event" (Python's audit event), "kind" (write, delete,
rename, mkdir, link, connect), "path" (absolute, its folder's links resolved), "dst" (rename /
link), "address" (connect)}``.

What it sees: everything Python code does through ``open`` / ``os`` / ``shutil`` / ``socket``
(https://docs.python.org/3/library/audit_events.html). What it cannot see: writes made in C or
C++ without Python's calls (SQLite's own files, pyarrow's and torch's native file I/O).

``read_events`` parses a log and ``touched_outside`` answers "which paths outside these folders
were written or deleted"."""

from __future__ import annotations

import json
import os
import sys
import threading
from collections.abc import Iterable
from pathlib import Path
from typing import Any, Optional

LOG_ENV = "STUDIO_AUDIT_LOG"
HERE = Path(__file__).resolve().parent
WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_TRUNC
CHANGES = ("write", "delete", "rename", "mkdir", "link")
NOT_FILES = ("/dev/", "/proc/")  # device and process files: never data


def audit_env(log: Path) -> dict[str, str]:
    """The environment variables that make a Python process (and every process it starts) log to
    ``log``: this folder first on ``PYTHONPATH``, ``STUDIO_AUDIT_LOG``, and no ``.pyc`` writes."""
    path = os.pathsep.join(p for p in (str(HERE), os.environ.get("PYTHONPATH", "")) if p)
    return {"PYTHONPATH": path, LOG_ENV: str(log), "PYTHONDONTWRITEBYTECODE": "1"}


# ----- the hook (runs in the audited process) -----
class _Log:
    """The log file, opened before the hook is added (so its own opens are never logged); reopened
    when its descriptor no longer is that file (a process that closed its descriptors)."""

    def __init__(self, path: str) -> None:
        self.path, self.fd, self.id = path, -1, (0, 0)
        self.open()

    def open(self) -> None:
        self.fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        st = os.fstat(self.fd)
        self.id = (st.st_dev, st.st_ino)

    def write(self, record: dict[str, Any]) -> None:
        try:
            st = os.fstat(self.fd)
            if (st.st_dev, st.st_ino) != self.id:
                self.open()
        except OSError:
            self.open()
        os.write(self.fd, (json.dumps(record) + "\n").encode("utf-8", "surrogateescape"))


def _text(value: Any) -> Optional[str]:
    if isinstance(value, int) or value is None:
        return None
    try:
        return os.fsdecode(os.fspath(value))
    except TypeError:
        return None


def _absolute(value: Any, dir_fd: Any = None) -> Optional[str]:
    """``value`` as an absolute path with its folder's links resolved (the last part kept: a link
    that is deleted is the link); relative to ``dir_fd``'s folder when one is given."""
    text = _text(value)
    if text is None:
        return None
    if not os.path.isabs(text):
        base = os.readlink(f"/proc/self/fd/{dir_fd}") if isinstance(dir_fd, int) and dir_fd >= 0 else os.getcwd()
        text = os.path.join(base, text)
    head, tail = os.path.split(os.path.normpath(text))
    return os.path.join(os.path.realpath(head), tail)


def _record(event: str, args: tuple) -> Optional[dict[str, Any]]:
    """What ``event`` did, or None when it changes nothing (a read-only open)."""
    if event == "open":
        path, _, flags = (tuple(args) + (None, None, None))[:3]
        if not isinstance(flags, int) or not flags & WRITE_FLAGS:
            return None
        return {"kind": "write", "path": _absolute(path)}
    if event in ("os.remove", "os.rmdir", "shutil.rmtree"):
        return {"kind": "delete", "path": _absolute(args[0], args[1] if len(args) > 1 else None)}
    if event == "os.mkdir":
        return {"kind": "mkdir", "path": _absolute(args[0], args[2] if len(args) > 2 else None)}
    if event == "os.truncate":
        return {"kind": "write", "path": _absolute(args[0])}
    if event == "os.symlink":  # (target, link, dir_fd): the link is what is written
        return {
            "kind": "link",
            "path": _absolute(args[1], args[2] if len(args) > 2 else None),
            "target": _text(args[0]),
        }
    if event in ("os.rename", "os.link"):
        kind = "rename" if event == "os.rename" else "link"
        src_fd, dst_fd = (tuple(args[2:4]) + (None, None))[:2]
        return {"kind": kind, "path": _absolute(args[0], src_fd), "dst": _absolute(args[1], dst_fd)}
    if event == "socket.connect":
        address = args[1]
        if isinstance(address, (str, bytes)):
            return {"kind": "connect", "address": _text(address)}
        return {"kind": "connect", "address": list(address) if isinstance(address, tuple) else repr(address)}
    return None


EVENTS = frozenset(
    ("open", "os.remove", "os.rmdir", "shutil.rmtree", "os.mkdir", "os.truncate", "os.rename", "os.link",
     "os.symlink", "socket.connect")
)  # fmt: skip


def install() -> bool:
    """Add the hook to this process when ``STUDIO_AUDIT_LOG`` is set; returns whether it was added.
    The hook never raises into the audited code: a record it cannot make is skipped."""
    path = os.environ.get(LOG_ENV)
    if not path:
        return False
    log, busy = _Log(path), threading.local()

    def hook(event: str, args: tuple) -> None:
        if event not in EVENTS or getattr(busy, "on", False):
            return
        busy.on = True
        try:
            record = _record(event, args)
            if record is not None and (record.get("path") or record.get("address") is not None):
                log.write({"pid": os.getpid(), "event": event, **record})
        except Exception:  # noqa: BLE001 - auditing must never break the process it watches
            pass
        finally:
            busy.on = False

    sys.addaudithook(hook)
    return True


# ----- reading a log (in the test) -----
def read_events(log: Path, start: int = 0) -> list[dict[str, Any]]:
    """The records of ``log`` from byte ``start`` on (a torn last line, still being written, is skipped)."""
    try:
        with open(log, "rb") as fh:
            fh.seek(start)
            lines = fh.read().split(b"\n")
    except FileNotFoundError:
        return []
    events = []
    for line in lines:
        try:
            events.append(json.loads(line))
        except ValueError:
            continue
    return events


def _inside(path: str, folders: list[str]) -> bool:
    return any(path == folder or path.startswith(folder.rstrip(os.sep) + os.sep) for folder in folders)


def touched_outside(
    events: Iterable[dict[str, Any]], folders: Iterable[Path], kinds: Iterable[str] = CHANGES
) -> list[dict[str, Any]]:
    """The records of ``kinds`` (default: every change) whose path, or rename / link target, lies
    outside every one of ``folders`` (resolved; device and ``/proc`` files never count)."""
    allowed = [os.path.realpath(folder) for folder in folders]
    kinds = set(kinds)
    found = []
    for event in events:
        if event.get("kind") not in kinds:
            continue
        paths = [p for p in (event.get("path"), event.get("dst")) if p]
        if any(not p.startswith(NOT_FILES) and not _inside(p, allowed) for p in paths):
            found.append(event)
    return found


def touched_inside(
    events: Iterable[dict[str, Any]], folders: Iterable[Path], kinds: Iterable[str] = CHANGES
) -> list[dict[str, Any]]:
    """The records of ``kinds`` whose path or target lies inside one of ``folders`` (resolved)."""
    watched = [os.path.realpath(folder) for folder in folders]
    kinds = set(kinds)
    return [
        e
        for e in events
        if e.get("kind") in kinds and any(_inside(p, watched) for p in (e.get("path"), e.get("dst")) if p)
    ]
