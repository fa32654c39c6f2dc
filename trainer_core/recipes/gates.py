"""Quality gates that drop rows, each counted by name in the run's report: ``schema`` (a structured
or judge value that fails its JSON schema), ``grounding`` (the evidence quote must appear in its
chunk; ``grounding_form``: whitespace, quote marks, dashes and case normalised, nothing else), ``judge`` (a score below its threshold), ``length`` (bounds in
characters) and ``dedupe`` (near-duplicates of a kept row, by rapidfuzz similarity)."""

from __future__ import annotations

import bisect
import unicodedata
from typing import Any, Optional

import jsonschema
from pydantic import BaseModel, Field
from rapidfuzz import fuzz, process

from trainer_core.recipes.columns import lookup

# Why a row was dropped, in the order a row meets them (the report lists each with its count):
DROP_REASONS = ("model_error", "schema", "expression", "grounding", "judge", "length", "dedupe")


class Grounding(BaseModel):
    """The quote at ``quote`` must appear in the text at ``within``."""

    model_config = {"extra": "forbid"}
    quote: str = Field(description="Column path of the evidence quote, e.g. qa.evidence.")
    within: str = Field("chunk", description="Column path of the text it must be found in.")
    min_chars: int = Field(12, ge=1, description="A shorter quote grounds nothing and drops its row.")


class JudgeGate(BaseModel):
    """A judge column's score ``score`` must be at least ``min``."""

    model_config = {"extra": "forbid"}
    column: str
    score: str
    min: int


class LengthGate(BaseModel):
    """The text at ``column`` must have ``min_chars``..``max_chars`` characters."""

    model_config = {"extra": "forbid"}
    column: str
    min_chars: int = Field(1, ge=0)
    max_chars: int = Field(20_000, ge=1)


class Dedupe(BaseModel):
    """A row whose ``column`` text is at least ``threshold`` similar to a kept row's is dropped."""

    model_config = {"extra": "forbid"}
    column: str
    threshold: float = Field(0.9, gt=0, le=1, description="Similarity (0-1, rapidfuzz ratio of normalised text).")


class Gates(BaseModel):
    """The gates of a recipe (``schema`` applies to every structured and judge column by itself)."""

    model_config = {"extra": "forbid"}
    grounding: Optional[Grounding] = None
    judge: list[JudgeGate] = []
    length: list[LengthGate] = []
    dedupe: Optional[Dedupe] = None

    def paths(self) -> list[str]:
        """Every column path the gates read."""
        found = [g.column for g in [*self.judge, *self.length]]
        if self.grounding:
            found += [self.grounding.quote, self.grounding.within]
        return found + ([self.dedupe.column] if self.dedupe else [])


def normalised(text: str) -> str:
    """``text`` with each run of whitespace as one space, trimmed."""
    return " ".join(str(text).split())


# Typographic quote marks and dashes as their ASCII forms (a model often writes one for the other).
_PLAIN_MARKS = str.maketrans(
    {
        **dict.fromkeys("\u2018\u2019\u201a\u201b\u2032", "'"),
        **dict.fromkeys("\u201c\u201d\u201e\u201f\u2033", '"'),
        **dict.fromkeys("\u2010\u2011\u2012\u2013\u2014\u2212", "-"),
    }
)
_QUOTE_ENDS = "\"' "  # marks a model puts around a quote, stripped from the quote only
_QUOTE_TAIL = ".,;:!?"  # a sentence's end mark, present in the chunk or not


def grounding_form(text: str) -> str:
    """``text`` as the grounding gate compares it: Unicode NFKC (ligatures such as "ﬁ" as letters),
    typographic quotes and dashes as ASCII, case-folded, each run of whitespace as one space."""
    return normalised(unicodedata.normalize("NFKC", str(text)).translate(_PLAIN_MARKS).casefold())


def quote_form(quote: str) -> str:
    """The evidence ``quote`` as the gate looks for it: ``grounding_form`` less the quote marks around
    it and its final punctuation (the words themselves must all be in the chunk, in order)."""
    return grounding_form(quote).strip(_QUOTE_ENDS).rstrip(_QUOTE_TAIL).strip(_QUOTE_ENDS)


def schema_failure(value: Any, schema: dict[str, Any]) -> Optional[str]:
    """Why ``value`` fails JSON ``schema`` (the first error, short), or None."""
    error = jsonschema.exceptions.best_match(jsonschema.Draft202012Validator(schema).iter_errors(value))
    if error is None:
        return None
    where = "/".join(str(p) for p in error.absolute_path) or "value"
    return f"{where}: {error.message[:200]}"


def _text(row: dict[str, Any], path: str) -> Optional[str]:
    try:
        value = lookup(row, path)
    except KeyError:
        return None
    return value if isinstance(value, str) else None


def row_failure(row: dict[str, Any], gates: Gates) -> Optional[tuple[str, str]]:
    """(gate, detail) of the first gate ``row`` fails among grounding, judge and length, or None."""
    if gates.grounding:
        quote, within = _text(row, gates.grounding.quote), _text(row, gates.grounding.within)
        if quote is None or within is None or len(quote_form(quote)) < gates.grounding.min_chars:
            return (
                "grounding",
                f"{gates.grounding.quote} is missing or shorter than {gates.grounding.min_chars} characters",
            )
        if quote_form(quote) not in grounding_form(within):
            return "grounding", f"{gates.grounding.quote} is not in {gates.grounding.within}"
    for gate in gates.judge:
        try:
            score = lookup(row, f"{gate.column}.{gate.score}.score")
        except KeyError:
            return "judge", f"{gate.column} has no score {gate.score}"
        if score < gate.min:
            return "judge", f"{gate.column}.{gate.score} is {score}, below {gate.min}"
    for gate in gates.length:
        text = _text(row, gate.column)
        if text is None or not gate.min_chars <= len(text) <= gate.max_chars:
            size = "no text" if text is None else f"{len(text)} characters"
            return "length", f"{gate.column} has {size}, outside {gate.min_chars}..{gate.max_chars}"
    return None


def near_duplicates(texts: list[str], threshold: float) -> dict[int, int]:
    """Index of each text that is at least ``threshold`` similar (0-1] to an earlier kept one ->
    that kept one's index (the most similar). Texts are compared case-folded with whitespace
    normalised, by rapidfuzz's ``fuzz.ratio`` (normalised Indel similarity), in C through
    ``process.extractOne``. Only kept texts whose length allows ``threshold`` are compared: the
    ratio of lengths ``n`` and ``m`` is at most ``1 - |n - m| / (n + m)``; an exact repeat is found
    by hash. So the cost is about N x the kept texts of a compatible length, not N x N in Python."""
    cutoff = threshold * 100
    exact: dict[str, int] = {}
    lengths: list[int] = []  # the kept texts' lengths, ascending
    kept: list[str] = []  # the kept texts, in that order
    indices: list[int] = []  # their indices in ``texts``
    dropped: dict[int, int] = {}
    for index, text in enumerate(texts):
        plain = normalised(text).casefold()
        if plain in exact:
            dropped[index] = exact[plain]
            continue
        size = len(plain)
        low = bisect.bisect_left(lengths, size * threshold / (2 - threshold))
        high = bisect.bisect_right(lengths, size * (2 - threshold) / threshold)
        match = (
            process.extractOne(plain, kept[low:high], scorer=fuzz.ratio, score_cutoff=cutoff) if high > low else None
        )
        if match is not None:
            dropped[index] = indices[low + match[2]]
            continue
        at = bisect.bisect_right(lengths, size)
        lengths.insert(at, size)
        kept.insert(at, plain)
        indices.insert(at, index)
        exact[plain] = index
    return dropped
