"""The GRPO reward library on hand-made completions, answer extraction, the short form, the reward
plan (defaults, refusals) and reward code behind the server's switch."""

from __future__ import annotations

import json

import pytest

from trainer_core.rewards.answers import final_answer, marked_answer, same_answer
from trainer_core.rewards.build import RewardError, chosen_rewards, labels, reward_functions
from trainer_core.rewards.code_file import RewardCodeError, check_reward_code, public_functions
from trainer_core.rewards.library import make_reward
from trainer_core.rewards.schemas import RewardSpec, parse_reward, reward_line
from trainer_core.schemas import TrainingStartRequest


def score(spec: str, completions: list, max_len: int = 100, **columns) -> list:
    function = make_reward(RewardSpec(**parse_reward(spec)), max_len, "r")
    return function(prompts=[[{"role": "user", "content": "q"}]] * len(completions), completions=completions, **columns)


@pytest.mark.parametrize(
    "text, numeric, expected",
    [
        ("so the total is 12.\n#### 1,200", True, 1200.0),
        ("we get \\boxed{\\frac{1}{2}} and then \\boxed{42}", True, 42.0),
        ("<think>3+4</think><answer> 7 </answer>", True, 7.0),
        ("It costs $18 in total.", True, 18.0),
        ("no number here", True, None),
        ("<answer>Paris</answer>", False, "Paris"),
        ("Paris", False, "Paris"),
    ],
)
def test_final_answers_are_read_as_math_graders_read_them(text, numeric, expected):
    assert final_answer(text, numeric) == expected


def test_marked_answers_take_nested_braces_and_the_last_mark():
    assert marked_answer("\\boxed{a_{1} + b}") == "a_{1} + b"
    assert marked_answer("#### 3\nlater\n#### 4") == "4"


def test_answer_matching_against_gsm8k_and_numbers():
    gsm8k = "Natalia sold 48/2 = 24 clips in May.\nAltogether 48+24 = 72 clips.\n#### 72"
    assert same_answer("The answer is 72.", gsm8k, numeric=True)
    assert same_answer("#### 72.0", 72, numeric=True)
    assert not same_answer("The answer is 71.", gsm8k, numeric=True)
    assert same_answer("<answer> paris </answer>", "Paris", numeric=False)
    assert not same_answer("Paris, France", "Paris", numeric=False)
    assert not same_answer("1", True, numeric=True)  # a boolean column is no answer


def test_exact_and_numeric_match_rewards():
    completions = [[{"role": "assistant", "content": "7 + 5 = 12. #### 12"}], [{"role": "assistant", "content": "13"}]]
    assert score("numeric_match", completions, answer=[12, 12]) == [1.0, 0.0]
    assert score("exact_match column=solution", ["<answer>12</answer>", "12 apples"], solution=["12", "12"]) == [
        1.0,
        0.0,
    ]
    with pytest.raises(KeyError, match="no column 'answer'"):
        score("numeric_match", ["1"], other=["1"])


def test_format_reward_matches_the_whole_completion():
    good = "<think>add them</think>\n<answer>12</answer>"
    assert score("format", [good, "12", good + " and more", "  " + good + "\n"]) == [1.0, 0.0, 0.0, 1.0]
    assert score("format pattern='\\d+'", ["12", "12 apples"]) == [1.0, 0.0]


def test_length_reward_with_and_without_a_target():
    assert score("length target_length=10", ["a"], completion_ids=[[1] * 10]) == [1.0]
    assert score("length target_length=10", ["a", "b"], completion_ids=[[1] * 5, [1] * 30]) == [0.5, 0.0]
    assert score("length", ["a", "b"], max_len=20, completion_ids=[[1] * 5, [1] * 40]) == [-0.25, -1.0]


def test_json_reward_with_a_schema():
    schema = '{"type": "object", "required": ["name"], "properties": {"age": {"type": "integer"}}}'
    completions = [
        '{"name": "Ada", "age": 36}',
        '```json\n{"name": "Ada"}\n```',
        '{"age": 36}',
        "{name: Ada}",
        '{"name": "x", "age": "old"}',
    ]
    assert score("json", completions) == [1.0, 1.0, 1.0, 0.0, 1.0]
    spec = RewardSpec(name="json", json_schema=schema)
    assert make_reward(spec, 100, "j")(prompts=[""] * 5, completions=completions) == [1.0, 1.0, 0.0, 0.0, 0.0]


def test_a_pattern_that_backtracks_forever_scores_zero_instead_of_hanging_the_run():
    import time

    began = time.monotonic()
    assert score("format pattern='(a+)+$'", ["a" * 40 + "b", "aaaa"]) == [0.0, 1.0]
    assert time.monotonic() - began < 5  # the regex library's time limit (0.5 s a completion)


def test_json_schemas_are_checked_and_never_fetch_or_read_a_reference(tmp_path):
    secret = tmp_path / "outside.json"
    secret.write_text('{"type": "object"}')
    for ref in ("http://127.0.0.1:7899/s.json", f"file://{secret}", str(secret), "other.json#/x"):
        with pytest.raises(ValueError, match="points outside the schema"):
            RewardSpec(name="json", json_schema=json.dumps({"properties": {"a": {"$ref": ref}}}))
    with pytest.raises(ValueError, match="must be a JSON object"):
        RewardSpec(name="json", json_schema="[1, 2]")
    with pytest.raises(ValueError, match="not a valid JSON schema"):
        RewardSpec(name="json", json_schema='{"type": 12}')
    with pytest.raises(ValueError, match="nests too deeply"):
        RewardSpec(name="json", json_schema="[" * 5000 + "]" * 5000)
    local = '{"$defs": {"n": {"type": "integer"}}, "properties": {"age": {"$ref": "#/$defs/n"}}}'
    assert score(f"json json_schema='{local}'", ['{"age": 3}', '{"age": "old"}']) == [1.0, 0.0]


def test_deeply_nested_reward_json_is_a_clear_error_not_a_crash():
    from pydantic import ValidationError

    for rewards in ("[" * 5000 + "]" * 5000, ['{"a":' * 3000 + "1" + "}" * 3000]):
        with pytest.raises(ValidationError, match="nests too deeply"):
            grpo(rewards=rewards)


def test_repetition_and_language_penalties():
    assert score("repetition", ["one two three four five"]) == [-0.0]
    looping = score("repetition ngram=2", ["the cat the cat the cat the cat"])[0]
    assert looping == pytest.approx(-(1 - 2 / 7))
    assert score("language", ["Hello there", "Привет мир", "12 + 3"]) == [1.0, 0.0, None]
    assert score("language script=cyrillic", ["Привет мир"]) == [1.0]


def test_an_unknown_script_is_refused_listing_the_known_ones_and_each_known_one_has_letters():
    import sys
    import unicodedata
    from typing import get_args

    from pydantic import ValidationError

    from trainer_core.rewards.library import SCRIPT_PREFIXES
    from trainer_core.vocabulary import LanguageScript

    with pytest.raises(ValidationError) as info:  # the case: it trained on "klingon" before
        TrainingStartRequest(
            local_datasets=["prompts.json"], training_method="grpo", rewards=["language script=klingon"]
        )
    [error] = info.value.errors()
    assert (
        error["loc"] == ("rewards", 0, "script") and "'latin', 'cyrillic'" in error["msg"] and "'cjk'" in error["msg"]
    )
    firsts = {unicodedata.name(chr(c), "").split(" ")[0] for c in range(sys.maxunicode + 1) if chr(c).isalpha()}
    for script in get_args(LanguageScript):  # every listed script counts some letters
        assert set(SCRIPT_PREFIXES.get(script, (script.upper(),))) & firsts, script
    assert "cyrillic" in RewardSpec.model_fields["script"].description


def test_the_short_form_round_trips_and_names_bad_parts():
    for line in [
        "numeric_match column=answer weight=2",
        "format weight=0.5 pattern='<a>.*</a>'",
        "length target_length=40",
    ]:
        spec = RewardSpec(**parse_reward(line))
        assert RewardSpec(**parse_reward(reward_line(spec))) == spec
    with pytest.raises(ValueError, match="colour=red"):
        parse_reward("format colour=red")
    with pytest.raises(ValueError, match="not a regular expression"):
        RewardSpec(name="format", pattern="(")
    with pytest.raises(ValueError, match="needs function"):
        RewardSpec(name="code")


def grpo(**values) -> TrainingStartRequest:
    return TrainingStartRequest(local_datasets=["x.json"], training_method="grpo", **values)


def test_the_default_reward_is_the_answer_match_and_a_run_without_one_is_refused():
    assert [s.label for s in chosen_rewards(grpo(), ["prompt", "answer"])] == ["numeric_match:answer"]
    with pytest.raises(RewardError, match="needs at least one reward"):
        chosen_rewards(grpo(), ["prompt", "solution"])
    with pytest.raises(RewardError, match="reads column 'answer', which the data lacks"):
        chosen_rewards(grpo(rewards="numeric_match"), ["prompt", "solution"])
    specs = chosen_rewards(grpo(rewards="format\nformat weight=2 pattern=x"), ["prompt"])
    assert labels(specs) == ["format", "format_2"]


def test_rewards_are_for_grpo_and_groups_must_fill_the_batch():
    with pytest.raises(ValueError, match="read by training_method grpo"):
        TrainingStartRequest(local_datasets=["x"], rewards="format")
    with pytest.raises(ValueError, match="multiple of num_generations"):
        grpo(batch_size=2, num_generations=4)
    assert grpo(batch_size=2, gradient_accumulation_steps=2).beta == 0.04
    assert grpo(loss_type="dr_grpo").grpo_loss_type == "dr_grpo"  # TRL's own name is taken too
    assert grpo().learning_rate == 2e-4 and grpo().beta == 0.04


REWARD_CODE = """
import math

def short_answer(prompts, completions, completion_ids=None, **kwargs):
    return [1.0 if len(c) < 10 else 0.0 for c in completions]

def uses_column(prompts, completions, completion_ids=None, answer=None, **kwargs):
    return [float(str(a) in c) for c, a in zip(completions, answer)]

def _helper():
    pass
"""


def test_reward_code_is_refused_without_the_switch_and_used_with_it(tmp_path):
    path = tmp_path / "my_rewards.py"
    path.write_text(REWARD_CODE)
    assert public_functions(path) == ["short_answer", "uses_column"]
    with pytest.raises(RewardCodeError, match="STUDIO_ALLOW_REWARD_CODE=1"):
        check_reward_code(str(path), [], allowed=False)
    with pytest.raises(RewardCodeError, match="has no function 'nope'"):
        check_reward_code(str(path), ["nope"], allowed=True)
    request = grpo(reward_file=str(path), rewards="code function=uses_column weight=2\nformat pattern=.*")
    functions, weights, names = reward_functions(request, ["prompt", "answer"], allowed=True)
    assert names == ["uses_column", "format"] and weights == [2.0, 1.0]
    assert functions[0](prompts=["p", "p"], completions=["it is 7", "8"], answer=[7, 7]) == [1.0, 0.0]
    everything = reward_functions(grpo(reward_file=str(path)), ["prompt"], allowed=True)
    assert everything[2] == ["short_answer", "uses_column"]


def test_a_broken_reward_file_is_named_with_its_line(tmp_path):
    path = tmp_path / "broken.py"
    path.write_text("def reward(prompts, completions:\n    pass\n")
    with pytest.raises(RewardCodeError, match="broken.py line 1"):
        public_functions(path)
    (tmp_path / "empty.py").write_text("X = 1\n")
    with pytest.raises(RewardCodeError, match="defines no reward function"):
        public_functions(tmp_path / "empty.py")
    (tmp_path / "rewards.txt").write_text("def reward(prompts, completions, **kw):\n    return [1.0]\n")
    with pytest.raises(RewardCodeError, match="not a .py file"):
        public_functions(tmp_path / "rewards.txt")
