"""Run ``probe`` in its own process: start, stream llama.cpp's log, cancel, read the answer.

The process ends within ~1 s when the process that started it dies (a watcher thread, as for the
converter), and is killed at Cancel. A crash in llama.cpp's native code ends only that process; the
error names llama.cpp and carries the last lines of its log.
"""

from __future__ import annotations

import errno
import json
import os
import queue
import subprocess
import sys
import threading
from collections import deque
from collections.abc import Callable
from pathlib import Path
from typing import Any

from trainer_core.export.gguf_convert import Cancelled
from trainer_core.export.llamacpp.tools import missing_message

ROOT = Path(__file__).resolve().parents[3]  # the folder holding trainer_core/
BOOT = """
import os, sys, threading, time
parent = os.getppid()
def watch():
    while os.getppid() == parent:
        time.sleep(1.0)
    os._exit(3)
threading.Thread(target=watch, daemon=True).start()
sys.path.insert(0, sys.argv.pop(1))
from trainer_core.export.llamacpp.probe import main
sys.exit(main())
"""


class LlamaCppMissing(RuntimeError):
    """llama.cpp is not built here (or for another CPU); the message names the command."""


class LlamaCppFailed(RuntimeError):
    """llama.cpp failed (an error or a crash); the message carries its last log lines."""


def run_probe(
    request: dict[str, Any],
    folder: Path,
    on_line: Callable[[str], None] = lambda line: None,
    should_stop: Callable[[], bool] = lambda: False,
) -> dict[str, Any]:
    """Send ``request`` to a new probe process using the llama.cpp build in ``folder``; return its
    answer (a dict). Raises LlamaCppMissing, Cancelled (the process is killed), OSError(ENOSPC)
    when the disk filled up, LlamaCppFailed otherwise."""
    problem = missing_message(folder)
    if problem:
        raise LlamaCppMissing(problem)
    safe_path = ["-P"] if sys.version_info >= (3, 11) else []
    process = subprocess.Popen(
        [sys.executable, *safe_path, "-c", BOOT, str(ROOT), str(folder)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        errors="replace",
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    lines: queue.Queue = queue.Queue()
    answers: list[str] = []
    tail: deque[str] = deque(maxlen=30)
    readers = [
        threading.Thread(target=_read, args=(process.stderr, lines), daemon=True),
        threading.Thread(target=_answers, args=(process.stdout, answers, lines), daemon=True),
    ]
    for reader in readers:
        reader.start()
    try:
        process.stdin.write(json.dumps(request))
        process.stdin.close()
        ended = 0
        while ended < len(readers):
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
    return _answer(code, answers, list(tail))


def _read(stream: Any, lines: queue.Queue) -> None:
    for line in stream:
        if line.strip():
            lines.put(line.rstrip())
    lines.put(None)


def _answers(stream: Any, answers: list[str], lines: queue.Queue) -> None:
    for line in stream:
        if line.startswith("RESULT "):
            answers.append(line[len("RESULT ") :])
        elif line.strip():
            lines.put(line.rstrip())
    lines.put(None)


def _answer(code: int, answers: list[str], tail: list[str]) -> dict[str, Any]:
    text = "\n".join(tail)
    answer = json.loads(answers[-1]) if answers else {}
    if code == 0 and "error" not in answer and answers:
        return answer
    if "No space left on device" in text or "ENOSPC" in text:
        raise OSError(errno.ENOSPC, "No space left on device")
    reason = next((line for line in reversed(tail) if "error" in line.lower()), "")
    if answer.get("error"):
        why = f" ({reason.strip()[-300:]})" if reason and reason not in answer["error"] else ""
        raise LlamaCppFailed(f"llama.cpp failed: {answer['error'][-500:]}{why}")
    how = f"was killed by signal {-code}" if code < 0 else f"exited with code {code}"
    last = tail[-1][-300:] if tail else "no output"
    raise LlamaCppFailed(f"llama.cpp {how} (its last line: {last})")
