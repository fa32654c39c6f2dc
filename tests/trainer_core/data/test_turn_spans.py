"""Trained-token labels from the assistant turns' character spans."""

from __future__ import annotations

from trainer_core.data.turn_spans import IGNORE, span_labels


def test_span_labels() -> None:
    ids = [10, 11, 12, 13, 14]
    offsets = [(0, 3), (3, 5), (5, 8), (8, 8), (8, 12)]
    assert span_labels(ids, offsets, [(3, 8)]) == [IGNORE, 11, 12, IGNORE, IGNORE]
    assert span_labels(ids, offsets, [(4, 6), (9, 12)]) == [IGNORE, 11, 12, IGNORE, 14]
    assert span_labels(ids, offsets, []) == [IGNORE] * 5
