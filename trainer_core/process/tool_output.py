"""Follow a tool's process (llama.cpp's converter, the llama.cpp probe): read its output streams
line by line in threads, pass each line on, keep the last ones for an error message, and kill the
process at Cancel. Shared by ``gguf_convert`` and ``llamacpp.client``."""

from __future__ import annotations

import queue
import subprocess
import threading
from collections import deque
from collections.abc import Callable, Sequence
from typing import IO

KEEP = 30  # lines kept for an error message


class Cancelled(RuntimeError):
    """The export was cancelled (the stop flag was set)."""


def follow(
    process: subprocess.Popen,
    streams: Sequence[IO[str]],
    on_line: Callable[[str], None],
    should_stop: Callable[[], bool],
    aside: Callable[[str], bool] = lambda line: False,
) -> tuple[int, list[str]]:
    """Read ``streams`` of ``process`` until they end and the process exits: each non-blank line
    (``\\r`` ends one too: progress bars) goes to ``on_line``, except those ``aside`` takes (it
    returns True for them). Returns (exit code, the last ``KEEP`` lines). Raises Cancelled once
    ``should_stop()`` is true; the process is killed whenever this returns or raises early."""
    lines: queue.Queue = queue.Queue()
    tail: deque[str] = deque(maxlen=KEEP)
    for stream in streams:
        threading.Thread(target=_read, args=(stream, lines, aside), daemon=True).start()
    try:
        ended = 0
        while ended < len(streams):
            if should_stop():
                raise Cancelled("cancelled")
            try:
                line = lines.get(timeout=0.2)
            except queue.Empty:
                continue
            if line is None:
                ended += 1
                continue
            tail.append(line)
            on_line(line)
        code = process.wait()
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    return code, list(tail)


def _read(stream: IO[str], lines: queue.Queue, aside: Callable[[str], bool]) -> None:
    for line in stream:
        if not aside(line) and line.strip():
            lines.put(line.rstrip())
    lines.put(None)
