"""GRPO prompts as users bring them (``data.prompts``): each layout, the reference answer kept for
the rewards, refusals naming the file and row, and prompts too long for max_seq_length."""

from __future__ import annotations

import json

import datasets
import pytest

from trainer_core.data.errors import DatasetError
from trainer_core.data.prepare import load_conversations
from trainer_core.data.prepared import prepare_data
from trainer_core.data.prompts import canonical_prompts
from trainer_core.schemas import TrainingStartRequest


def rows(**columns) -> datasets.Dataset:
    return datasets.Dataset.from_dict(columns)


def test_prompt_strings_and_message_lists():
    out = canonical_prompts(rows(prompt=["What is 2+2?"], answer=[4]), "a.json")
    assert out[0]["prompt"] == [{"role": "user", "content": "What is 2+2?"}] and out[0]["answer"] == 4
    chat = [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Hi"},
        {"role": "assistant", "content": "Hello"},
    ]
    out = canonical_prompts(rows(prompt=[chat]), "b.json")
    assert out[0]["prompt"] == chat[:2] and out[0]["answer"] == "Hello"  # the trailing answer is the reference


def test_gsm8k_questions_alpaca_and_sharegpt_rows():
    out = canonical_prompts(rows(question=["Natalia sold 48 clips..."], answer=["... #### 72"]), "gsm8k.jsonl")
    assert out[0]["prompt"][-1]["content"] == "Natalia sold 48 clips..." and out[0]["answer"] == "... #### 72"
    out = canonical_prompts(
        rows(instruction=["Add"], input=["3 and 4"], output=["7"], system=["Math tutor"]), "alpaca.json"
    )
    assert out[0]["prompt"] == [
        {"role": "system", "content": "Math tutor"},
        {"role": "user", "content": "Add\n\n3 and 4"},
    ]
    assert out[0]["answer"] == "7"
    turns = [{"from": "human", "value": "Capital of France?"}, {"from": "gpt", "value": "Paris"}]
    out = canonical_prompts(rows(conversations=[turns], solution=["Paris"]), "sharegpt.json")
    assert out[0]["prompt"] == [{"role": "user", "content": "Capital of France?"}]
    assert out[0]["solution"] == "Paris" and out[0]["answer"] == "Paris"


def test_no_prompt_is_refused_naming_the_file_and_the_mapping():
    with pytest.raises(DatasetError, match=r"notes.json has no prompt for GRPO .*custom_format_mapping"):
        canonical_prompts(rows(problem=["x"], answer=["1"]), "notes.json")
    with pytest.raises(DatasetError, match=r"a.json, row 2: .*empty"):
        canonical_prompts(rows(prompt=["fine", "  "]), "a.json")
    with pytest.raises(DatasetError, match=r"b.json, row 1: .*no user turn"):
        canonical_prompts(rows(messages=[[{"role": "assistant", "content": "hi"}]]), "b.json")


def test_a_file_is_read_with_the_custom_mapping_and_long_prompts_are_left_out(tmp_path, tiny_model_dir):
    from transformers import AutoTokenizer

    path = tmp_path / "math.json"
    path.write_text(json.dumps([{"problem": "1+1?" if i else "word " * 300, "solution": str(2)} for i in range(5)]))
    request = TrainingStartRequest(
        local_datasets=[str(path)],
        training_method="grpo",
        custom_format_mapping={"prompt": "problem"},
        rewards="numeric_match column=solution",
        max_seq_length=64,
    )
    loaded, fmt = load_conversations(request)
    assert fmt.value == "prompt_only" and loaded.column_names == ["solution", "prompt"]
    data = prepare_data(request, AutoTokenizer.from_pretrained(tiny_model_dir))
    assert data.stats.rows == 4 and data.stats.dropped_rows == 1
    with pytest.raises(DatasetError, match="prompt_only.*training_method grpo"):
        load_conversations(TrainingStartRequest(local_datasets=[str(path)], format_type="prompt_only"))
