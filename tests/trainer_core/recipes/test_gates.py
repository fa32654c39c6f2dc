"""Each gate drops what it should and keeps what it should: grounding (normalised whitespace),
judge threshold, length bounds, JSON schema, near-duplicates."""

from __future__ import annotations

from trainer_core.recipes.gates import (
    Dedupe,
    Gates,
    Grounding,
    JudgeGate,
    LengthGate,
    near_duplicates,
    row_failure,
    schema_failure,
)

CHUNK = "Whisk the flour and the eggs.\nAdd the milk   slowly,\tstirring all the time."


def _row(evidence: str, score: int = 3, answer: str = "Slowly, while stirring.") -> dict:
    return {
        "chunk": CHUNK,
        "qa": {"question": "How is the milk added?", "answer": answer, "evidence": evidence},
        "quality": {"correctness": {"reasoning": "fine", "score": score}},
    }


GROUNDED = Gates(grounding=Grounding(quote="qa.evidence"))


def test_grounding_finds_the_quote_across_line_breaks_and_spaces():
    assert row_failure(_row("Add the milk slowly, stirring all the time."), GROUNDED) is None
    assert row_failure(_row("the flour and the eggs. Add the milk"), GROUNDED) is None  # across the line break


def test_grounding_forgives_case_quote_marks_dashes_ligatures_and_the_end_mark_only():
    chunk = "The \ufb01rst step \u2014 \u201cwhisk\u201d the eggs.\nThen add milk."
    kept = (
        'the first step - "whisk" the eggs',  # ligature, dash, typographic quotes, case
        "\u2018The first step \u2014 \u201cwhisk\u201d the eggs.\u2019",  # quoted by the model
        'THE FIRST STEP - "WHISK" THE EGGS. THEN ADD MILK',  # across the line break, no end mark
    )
    for quote in kept:
        assert row_failure({"chunk": chunk, "qa": {"evidence": quote}}, GROUNDED) is None, quote
    changed = ("the first step - whisk the eggs", 'the first step - "beat" the eggs', "first step whisk eggs")
    for quote in changed:  # a word or a mark left out or changed is not the text
        failed = row_failure({"chunk": chunk, "qa": {"evidence": quote}}, GROUNDED)
        assert failed == ("grounding", "qa.evidence is not in chunk"), quote


def test_grounding_drops_a_quote_not_in_the_chunk_a_short_one_and_a_missing_one():
    assert row_failure(_row("Add the cream slowly"), GROUNDED) == ("grounding", "qa.evidence is not in chunk")
    assert row_failure(_row("milk"), GROUNDED)[0] == "grounding"  # shorter than min_chars grounds nothing
    row = _row("x")
    del row["qa"]["evidence"]
    assert row_failure(row, GROUNDED) == ("grounding", "qa.evidence is missing or shorter than 12 characters")


def test_judge_threshold_and_length_bounds():
    gates = Gates(
        judge=[JudgeGate(column="quality", score="correctness", min=2)],
        length=[LengthGate(column="qa.answer", min_chars=5, max_chars=30)],
    )
    assert row_failure(_row("e", score=2), gates) is None
    assert row_failure(_row("e", score=1), gates) == ("judge", "quality.correctness is 1, below 2")
    assert row_failure(_row("e", answer="Yes"), gates) == ("length", "qa.answer has 3 characters, outside 5..30")
    assert row_failure(_row("e", answer="x" * 31), gates)[0] == "length"


def test_schema_failure_names_the_place():
    schema = {"type": "object", "properties": {"answer": {"type": "string"}}, "required": ["answer"]}
    assert schema_failure({"answer": "yes"}, schema) is None
    assert schema_failure({"answer": 3}, schema) == "answer: 3 is not of type 'string'"
    assert "'answer' is a required property" in schema_failure({}, schema)


def test_near_duplicates_are_dropped_in_favour_of_the_first():
    texts = ["How is the milk added?", "how is the  milk added ?", "What goes in first?", "How is milk added?"]
    assert near_duplicates(texts, 0.9) == {1: 0, 3: 0}
    assert near_duplicates(texts, 1.0) == {}  # only identical (after normalising) texts
    assert Dedupe(column="q").threshold == 0.9


def test_near_duplicates_find_what_comparing_every_pair_finds(datasets_dir):
    """The length window and the exact-repeat lookup skip no pair that reaches the threshold: the
    rows dropped are those a comparison of each row with every kept one drops (shared Alpaca
    instructions, a third of them with one word changed)."""
    import json
    import random

    from rapidfuzz import fuzz

    from trainer_core.recipes.gates import normalised

    rows = json.loads((datasets_dir / "alpaca_en_demo.json").read_text(encoding="utf-8"))
    pick = random.Random(0)
    texts = []
    for _ in range(400):
        words = pick.choice(rows[:150])["instruction"].split()
        if pick.random() < 0.3:
            at = pick.randrange(len(words))
            words[at] = words[at] + "s"
        texts.append(" ".join(words))
    for threshold in (0.8, 0.9, 1.0):
        kept, expected = [], set()
        for index, text in enumerate(texts):
            plain = normalised(text).casefold()
            if any(fuzz.ratio(plain, other) >= threshold * 100 for other in kept):
                expected.add(index)
            else:
                kept.append(plain)
        assert set(near_duplicates(texts, threshold)) == expected and expected, threshold
