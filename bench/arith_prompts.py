"""Arithmetic prompts for GRPO runs and benchmarks: questions with their answers in columns.

``make_rows(200, seed=0)`` gives the same 200 rows on every machine: additions, subtractions and
small multiplications of two-digit numbers, the operands and the answer in their own columns
(``a``, ``b``, ``op``, ``answer``), the question in ``prompt``. The answer is a whole number, so
the default reward (``numeric_match`` on ``answer``) scores a completion by its final number.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

QUESTION = "What is {a} {op} {b}? Give the result as a number."


def make_rows(count: int = 200, seed: int = 0) -> list[dict]:
    """``count`` rows from ``random.Random(seed)`` (see the module)."""
    rng = random.Random(seed)
    rows = []
    for _ in range(count):
        op = rng.choice("+-*")
        a, b = (rng.randint(2, 12), rng.randint(2, 12)) if op == "*" else (rng.randint(10, 99), rng.randint(10, 99))
        answer = a + b if op == "+" else a - b if op == "-" else a * b
        rows.append({"prompt": QUESTION.format(a=a, op=op, b=b), "a": a, "b": b, "op": op, "answer": answer})
    return rows


def write_rows(path: Path, count: int = 200, seed: int = 0) -> Path:
    """``make_rows`` written to ``path`` as a JSON list; returns ``path``."""
    path.write_text(json.dumps(make_rows(count, seed), indent=1), encoding="utf-8")
    return path


if __name__ == "__main__":
    import sys

    print(write_rows(Path(sys.argv[1] if len(sys.argv) > 1 else "arith_prompts.json")))
