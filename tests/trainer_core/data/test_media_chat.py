"""The media chat pieces every kind that reads media shares: turns made content parts, and labels
carried over a processor's expansion of each media placeholder (inserted tokens and media tokens
never scored)."""

from __future__ import annotations

from trainer_core.data.media_chat import carry_labels, part_messages
from trainer_core.data.tokenization import IGNORE


def test_markers_become_parts_of_the_given_type_and_text_between_them_stays():
    turns = [{"role": "user", "content": "<audio>Which one?<audio>"}, {"role": "assistant", "content": "The first."}]
    assert part_messages(turns, "<audio>", "audio") == [
        {"role": "user", "content": [{"type": "audio"}, {"type": "text", "text": "Which one?"}, {"type": "audio"}]},
        {"role": "assistant", "content": [{"type": "text", "text": "The first."}]},
    ]


def test_labels_follow_their_tokens_through_the_expansion_and_media_tokens_stay_unscored():
    media = {9}
    before, labels = [1, 9, 2, 3, 4], [IGNORE, IGNORE, IGNORE, 3, 4]  # 9: the placeholder, 3 4: the answer
    after = [1, 9, 9, 9, 2, 3, 4]  # the processor made the placeholder three tokens
    assert carry_labels(before, labels, after, media) == [IGNORE, IGNORE, IGNORE, IGNORE, IGNORE, 3, 4]
    assert carry_labels([1, 9, 5], [1, 9, 5], [1, 9, 9, 5], media) == [1, IGNORE, IGNORE, 5]  # never a media token
