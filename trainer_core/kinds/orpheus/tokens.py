"""An Orpheus-style model's sequences, every special id read from its tokenizer by token name
(``<custom_token_N>``: Orpheus' start_of_speech is custom 1, end_of_speech 2, start / end of human
3 / 4, start / end of ai 5 / 6, pad 7, and the audio codes start at custom 10), never Llama 3's ids.

A SNAC frame's 7 codes (``LAYOUT``: level 0's one, level 1's two, level 2's four) are said in the
order ``l0[i], l1[2i], l2[4i], l2[4i+1], l1[2i+1], l2[4i+2], l2[4i+3]``, the code at position p of
a frame offset by ``p * 4096`` onto the code tokens (as canopylabs' and Unsloth's Orpheus scripts
do). A training sequence is ``start_of_human, text ids, end_of_text, end_of_human, start_of_ai,
start_of_speech`` (the prompt) then the codes, ``end_of_speech, end_of_ai`` (the speech: the only
positions scored). A speaker is said as Orpheus says it: ``"name: text"``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from trainer_core.kinds.orpheus.family import CODEBOOK_SIZE, ORPHEUS_TOKEN
from trainer_core.refusals import Refusal

CUSTOM = {  # field -> N of <custom_token_N>
    "start_of_speech": 1,
    "end_of_speech": 2,
    "start_of_human": 3,
    "end_of_human": 4,
    "start_of_ai": 5,
    "end_of_ai": 6,
    "pad": 7,
}
FIRST_CODE = 10  # <custom_token_10> is code 0 of a frame's first position
LAYOUT = ((0, 0), (1, 0), (2, 0), (2, 1), (1, 1), (2, 2), (2, 3))  # a frame's position -> (level, index in frame)
PER_FRAME = (1, 2, 4)  # codes a frame holds of each level
FRAME = len(LAYOUT)  # 7 tokens a frame
END_OF_TEXT = "<|eot_id|>"  # Orpheus ends the text with Llama 3's end of turn (else the tokenizer's eos)


def custom(n: int) -> str:
    """The name of custom token ``n``."""
    return f"{ORPHEUS_TOKEN}{n}>"


@dataclass(frozen=True)
class OrpheusTokens:
    """The special ids of one tokenizer (``of``) and the id of its first code token."""

    start_of_speech: int
    end_of_speech: int
    start_of_human: int
    end_of_human: int
    start_of_ai: int
    end_of_ai: int
    pad: int
    end_of_text: int
    first_code: int

    @classmethod
    def of(cls, tokenizer: Any) -> OrpheusTokens:
        """The ids of ``tokenizer``'s tokens; raises Refusal (field ``model_name``) when one is
        missing or the ``FRAME * 4096`` code tokens are not consecutive ids."""
        unknown = getattr(tokenizer, "unk_token_id", None)

        def find(name: str) -> int:
            found = tokenizer.convert_tokens_to_ids(name)
            if found is None or found == unknown:
                raise Refusal(
                    f"model_name: its tokenizer has no {name} token: not an Orpheus-style model (its audio tokens "
                    f"are {custom(FIRST_CODE)} to {custom(FIRST_CODE + FRAME * CODEBOOK_SIZE - 1)})",
                    fields=("model_name",),
                    code="orpheus_tokens_missing",
                )
            return int(found)

        ids = {field: find(custom(n)) for field, n in CUSTOM.items()}
        first, last = find(custom(FIRST_CODE)), find(custom(FIRST_CODE + FRAME * CODEBOOK_SIZE - 1))
        if last - first != FRAME * CODEBOOK_SIZE - 1:
            raise Refusal(
                f"model_name: its code tokens {custom(FIRST_CODE)}..{custom(FIRST_CODE + FRAME * CODEBOOK_SIZE - 1)} "
                "are not consecutive ids: not an Orpheus-style tokenizer",
                fields=("model_name",),
                code="orpheus_tokens_missing",
            )
        eot = tokenizer.convert_tokens_to_ids(END_OF_TEXT)
        end_of_text = eot if eot is not None and eot != unknown else tokenizer.eos_token_id
        return cls(**ids, end_of_text=int(end_of_text), first_code=first)

    def is_code(self, token: int, position: int) -> bool:
        """True when ``token`` is a code of frame position ``position`` (0..6)."""
        low = self.first_code + position * CODEBOOK_SIZE
        return low <= token < low + CODEBOOK_SIZE


def interleave(levels: list[list[int]], first_code: int) -> list[int]:
    """The code tokens of ``levels`` (F, 2F and 4F codes, each 0..4095): 7 a frame (``LAYOUT``)."""
    frames = len(levels[0])
    return [
        first_code + position * CODEBOOK_SIZE + levels[level][frame * PER_FRAME[level] + index]
        for frame in range(frames)
        for position, (level, index) in enumerate(LAYOUT)
    ]


def deinterleave(tokens: list[int], first_code: int) -> list[list[int]]:
    """``interleave``'s inverse: the levels of the whole frames in ``tokens`` (a last partial frame
    is dropped). Raises ValueError for a token that is not a code of its frame position."""
    frames = len(tokens) // FRAME
    levels: list[list[int]] = [[0] * (frames * n) for n in PER_FRAME]
    for at in range(frames * FRAME):
        frame, position = divmod(at, FRAME)
        code = tokens[at] - first_code - position * CODEBOOK_SIZE
        if not 0 <= code < CODEBOOK_SIZE:
            raise ValueError(f"token {tokens[at]} at {at} is not a code of frame position {position}")
        level, index = LAYOUT[position]
        levels[level][frame * PER_FRAME[level] + index] = code
    return levels


def spoken(text: str, speaker: str) -> str:
    """The text as Orpheus reads it: ``"speaker: text"``, or the text alone for no speaker."""
    return f"{speaker}: {text}" if speaker else text


def _prompt(ids: OrpheusTokens, words: list[int]) -> list[int]:
    """The prompt around the text's tokens ``words``."""
    return [ids.start_of_human, *words, ids.end_of_text, ids.end_of_human, ids.start_of_ai, ids.start_of_speech]


def prompt_ids(ids: OrpheusTokens, tokenizer: Any, text: str, speaker: str = "") -> list[int]:
    """The prompt that makes the model say ``text`` (see the module docstring)."""
    return _prompt(ids, tokenizer(spoken(text, speaker), add_special_tokens=True)["input_ids"])


def speech_ids(ids: OrpheusTokens, levels: list[list[int]]) -> list[int]:
    """The scored part of a training sequence: the codes of ``levels``, end_of_speech, end_of_ai."""
    return [*interleave(levels, ids.first_code), ids.end_of_speech, ids.end_of_ai]


def prompt_lengths(ids: OrpheusTokens, tokenizer: Any, texts: list[str], speakers: list[str]) -> list[int]:
    """``len(prompt_ids(...))`` of each (text, speaker), tokenized in one call."""
    words = tokenizer([spoken(t, s) for t, s in zip(texts, speakers)], add_special_tokens=True)["input_ids"]
    return [len(_prompt(ids, w)) for w in words]
