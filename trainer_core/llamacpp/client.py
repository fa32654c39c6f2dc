"""Run ``probe`` in its own process: start, stream llama.cpp's log, cancel, read the answer.

The process ends within ~1 s when the process that started it dies (a watcher thread, as for the
converter), and is killed at Cancel. A crash in llama.cpp's native code ends only that process; the
error names llama.cpp and carries the last lines of its log.
"""

from __future__ import annotations

import errno
import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from trainer_core.llamacpp.build import missing_message
from trainer_core.process.tool_output import follow

ROOT = Path(__file__).resolve().parents[2]  # the folder holding trainer_core/
BOOT = """
import os, sys, threading, time
parent = os.getppid()
def watch():
    while os.getppid() == parent:
        time.sleep(1.0)
    os._exit(3)
threading.Thread(target=watch, daemon=True).start()
sys.path.insert(0, sys.argv.pop(1))
from trainer_core.llamacpp.probe import main
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
    answers: list[str] = []

    def answer_line(line: str) -> bool:  # the probe's answer, kept apart from llama.cpp's log
        if line.startswith("RESULT "):
            answers.append(line[len("RESULT ") :])
            return True
        return False

    try:
        process.stdin.write(json.dumps(request))
        process.stdin.close()
    except BrokenPipeError:  # it died at once: its log says why
        pass
    code, tail = follow(process, [process.stderr, process.stdout], on_line, should_stop, answer_line)
    return _answer(code, answers, tail)


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
