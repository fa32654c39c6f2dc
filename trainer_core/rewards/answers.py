"""Final answers out of model text and reference columns, as math-reward scripts read them.

The usual conventions, tried in this order (the first that is present wins):

- ``<answer>...</answer>`` (the R1-style format the ``format`` reward asks for);
- ``\\boxed{...}`` (MATH / Minerva, Lewkowycz et al. 2022), the last one, nested braces allowed;
- ``#### 42`` (GSM8K's answer lines, Cobbe et al. 2021, https://github.com/openai/grade-school-math);
- the last number in the text (``last_number``), for ``numeric`` matching only.

Numbers compare as numbers: ``1,000``, ``1000.0``, ``$1000`` and ``1e3`` are the same answer.
"""

from __future__ import annotations

import math
import re
from typing import Optional

_ANSWER_TAG = re.compile(r"<answer>(.*?)</answer>", re.DOTALL | re.IGNORECASE)
_HASHES = re.compile(r"####\s*(.+?)\s*$", re.MULTILINE)
_NUMBER = re.compile(r"-?\$?\s*\d[\d,]*(?:\.\d+)?(?:[eE][-+]?\d+)?|-?\.\d+")


def boxed(text: str) -> Optional[str]:
    """The content of the last ``\\boxed{...}`` in ``text`` (nested braces kept), None if none."""
    start = text.rfind("\\boxed{")
    if start < 0:
        return None
    depth, begin = 0, start + len("\\boxed{")
    for i in range(begin, len(text)):
        if text[i] == "{":
            depth += 1
        elif text[i] == "}":
            if depth == 0:
                return text[begin:i].strip()
            depth -= 1
    return None  # unclosed


def marked_answer(text: str) -> Optional[str]:
    """The answer ``text`` marks (``<answer>``, ``\\boxed{}``, ``####``; see the module), stripped,
    or None when it marks none."""
    tagged = _ANSWER_TAG.findall(text)
    if tagged:
        return tagged[-1].strip()
    found = boxed(text)
    if found is not None:
        return found
    hashes = _HASHES.findall(text)
    return hashes[-1].strip() if hashes else None


def as_number(text: str) -> Optional[float]:
    """``text`` read as one number (commas, ``$``, spaces and a trailing ``.`` or ``%`` ignored), or
    None when it is not exactly one number."""
    cleaned = text.strip().rstrip(".%").replace(",", "").replace("$", "").replace(" ", "")
    try:
        value = float(cleaned)
    except ValueError:
        return None
    return value if math.isfinite(value) else None


def last_number(text: str) -> Optional[float]:
    """The last number written in ``text`` (as ``as_number`` reads it), None if there is none."""
    for match in reversed(_NUMBER.findall(text)):
        value = as_number(match)
        if value is not None:
            return value
    return None


def final_answer(text: str, numeric: bool) -> Optional[str | float]:
    """The final answer of ``text``: a float when ``numeric`` (the marked answer read as a number,
    else the last number of the marked answer or of the whole text), else the marked answer's text
    (or the whole text, stripped, when nothing is marked). None when there is no answer."""
    marked = marked_answer(text)
    if not numeric:
        return marked if marked is not None else (text.strip() or None)
    scope = marked if marked is not None else text
    value = as_number(scope)
    return value if value is not None else last_number(scope)


def normal_text(text: str) -> str:
    """``text`` compared loosely: lower case, inner whitespace collapsed, outer punctuation removed."""
    return " ".join(text.lower().split()).strip(" .,;:!?\"'`")


def same_answer(completion: str, reference: object, numeric: bool) -> bool:
    """Whether ``completion``'s final answer equals ``reference`` (a column value: a number, or text
    whose own final answer is taken, e.g. GSM8K's ``... #### 72``). ``numeric``: equal as numbers
    (relative tolerance 1e-6), falling back to ``exact`` text when the reference is not a number."""
    if isinstance(reference, bool) or reference is None:
        return False
    if numeric:
        wanted = float(reference) if isinstance(reference, (int, float)) else final_answer(str(reference), True)
        if isinstance(wanted, float) and math.isfinite(wanted):
            got = final_answer(completion, True)
            return isinstance(got, float) and math.isclose(got, wanted, rel_tol=1e-6, abs_tol=1e-9)
    wanted_text = final_answer(str(reference), False)
    got_text = final_answer(completion, False)
    return wanted_text is not None and got_text is not None and normal_text(got_text) == normal_text(wanted_text)
