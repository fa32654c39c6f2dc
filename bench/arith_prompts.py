"""Arithmetic prompts for GRPO runs and benchmarks: questions with their answers in columns.

``make_rows(200, seed=0)`` gives the same 200 rows on every machine: additions and subtractions of
two-digit numbers and multiplications of numbers from 2 to 12, the operands and the answer in their
own columns (``a``, ``b``, ``op``, ``answer``), the question in ``prompt``. ``digits=1``: one-digit
operands (1 to 9; a subtraction never goes below 0), the level the default 135M model answers about
one time in five at temperature 0.7 (two-digit rows: about one in eight). The answer is a whole
number, so the default reward (``numeric_match`` on ``answer``) scores a completion by its final
number.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

QUESTION = "What is {a} {op} {b}? Give the result as a number."


def make_rows(count: int = 200, seed: int = 0, digits: int = 2) -> list[dict]:
    """``count`` rows from ``random.Random(seed)`` with ``digits``-digit operands (1 or 2; see the
    module). Raises ValueError for another ``digits``."""
    if digits not in (1, 2):
        raise ValueError(f"digits must be 1 or 2, not {digits}")
    rng = random.Random(seed)
    rows = []
    for _ in range(count):
        op = rng.choice("+-*")
        if digits == 1:
            a, b = rng.randint(1, 9), rng.randint(1, 9)
            a, b = (b, a) if op == "-" and b > a else (a, b)
        elif op == "*":
            a, b = rng.randint(2, 12), rng.randint(2, 12)
        else:
            a, b = rng.randint(10, 99), rng.randint(10, 99)
        answer = a + b if op == "+" else a - b if op == "-" else a * b
        rows.append({"prompt": QUESTION.format(a=a, op=op, b=b), "a": a, "b": b, "op": op, "answer": answer})
    return rows


def write_rows(path: Path, count: int = 200, seed: int = 0, digits: int = 2) -> Path:
    """``make_rows`` written to ``path`` as a JSON list; returns ``path``."""
    path.write_text(json.dumps(make_rows(count, seed, digits), indent=1), encoding="utf-8")
    return path


if __name__ == "__main__":
    import sys

    print(write_rows(Path(sys.argv[1] if len(sys.argv) > 1 else "arith_prompts.json")))
