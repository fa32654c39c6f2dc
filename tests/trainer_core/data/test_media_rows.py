"""Markers of a row's media checked against its items: as written, or placed before the first user
turn; a count that differs, or no user turn to place them in, refused with the words to fix it."""

from __future__ import annotations

import pytest

from trainer_core.data.errors import RowError
from trainer_core.data.media_rows import place_markers

TURNS = [{"role": "user", "content": "What is it?"}, {"role": "assistant", "content": "A cough."}]


def test_markers_are_kept_or_placed_before_the_first_user_turn():
    written = [{"role": "user", "content": "<audio>What is it?"}, TURNS[1]]
    assert place_markers(written, 1, "<audio>", "audio clip") is written
    assert place_markers(TURNS, 2, "<audio>", "audio clip")[0]["content"] == "<audio><audio>What is it?"
    assert TURNS[0]["content"] == "What is it?"  # the row itself is left as it was


def test_a_marker_count_that_differs_and_a_row_without_a_user_turn_are_refused():
    with pytest.raises(RowError, match=r"its turns hold 1 <audio> marker\(s\) but it has 2 audio clip\(s\)"):
        place_markers([{"role": "user", "content": "<audio>Hm"}, TURNS[1]], 2, "<audio>", "audio clip")
    with pytest.raises(RowError, match="no user turn to show them in"):
        place_markers([TURNS[1]], 1, "<image>", "image")
