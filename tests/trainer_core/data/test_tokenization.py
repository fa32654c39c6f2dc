"""Rendering with the real SmolLM2 ChatML template, the loss mask token by token, truncation."""

from __future__ import annotations

import time
from pathlib import Path

import datasets
import pytest

from trainer_core.data.files import DatasetError, read_file
from trainer_core.data.formats import normalize
from trainer_core.data.tokenization import IGNORE, tokenize_dataset
from trainer_core.data.tool_rows import conversation
from trainer_core.vocabulary import FormatType

GLAIVE_MULTI_CALL_ROW = 3  # human, function_call, observation, gpt, three times


def canonical(datasets_dir: Path, name: str) -> datasets.Dataset:
    return normalize(read_file(str(datasets_dir / name)), FormatType.auto, name)


def messages_rows(*conversations: list[dict]) -> datasets.Dataset:
    return datasets.Dataset.from_dict({"messages": list(conversations)})


def labelled_runs(labels: list[int]) -> list[tuple[int, int]]:
    """[start, end) token ranges of consecutive labelled tokens."""
    runs, start = [], None
    for k, label in enumerate([*labels, IGNORE]):
        if label != IGNORE and start is None:
            start = k
        elif label == IGNORE and start is not None:
            runs.append((start, k))
            start = None
    return runs


def decode(tokenizer, ids: list[int]) -> str:
    return tokenizer.decode(ids, skip_special_tokens=False, clean_up_tokenization_spaces=False)


def check_consistent(tokenized: datasets.Dataset, stats, max_len: int) -> None:
    """Stats agree with the columns; labels are the ids or -100; nothing is longer than max_len."""
    ids_rows, label_rows = tokenized["input_ids"], tokenized["labels"]
    assert tokenized.column_names == ["input_ids", "labels"]
    assert stats.rows == len(ids_rows) and stats.max_seq_length == max_len
    assert stats.total_tokens == sum(len(ids) for ids in ids_rows)
    assert stats.trained_tokens == sum(label != IGNORE for labels in label_rows for label in labels)
    for ids, labels in zip(ids_rows, label_rows):
        assert 0 < len(ids) == len(labels) <= max_len
        assert all(label in (IGNORE, token) for token, label in zip(ids, labels))
        assert any(label != IGNORE for label in labels)


@pytest.mark.parametrize(
    "name,rows,dropped",
    [
        ("alpaca_en_demo.json", 999, 0),
        ("identity.json", 91, 0),
        ("glaive_toolcall_en_demo.json", 298, 2),
        ("c4_demo.jsonl", 300, 0),
    ],
)
def test_shared_files_tokenize(tokenizer, datasets_dir: Path, name: str, rows: int, dropped: int) -> None:
    data = canonical(datasets_dir, name)
    started = time.perf_counter()
    tokenized, stats = tokenize_dataset(data, tokenizer, 512, train_on_completions=True)
    assert time.perf_counter() - started < 10  # ~1 s for alpaca on 2 cores
    check_consistent(tokenized, stats, 512)
    assert (stats.rows, stats.dropped_rows) == (rows, dropped)  # glaive: two tool lists fill 512 tokens
    assert stats.truncated_tokens >= stats.truncated_rows
    if name == "c4_demo.jsonl":
        assert stats.trained_tokens == stats.total_tokens
    else:
        assert 0 < stats.trained_tokens < stats.total_tokens


def test_alpaca_mask_is_the_output_and_end_of_turn(tokenizer, datasets_dir: Path) -> None:
    data = canonical(datasets_dir, "identity.json").select(range(3))
    tokenized, _ = tokenize_dataset(data, tokenizer, 512, train_on_completions=True)
    ids, labels = tokenized[1]["input_ids"], tokenized[1]["labels"]
    ((start, end),) = labelled_runs(labels)
    assert decode(tokenizer, ids[start:end]) == data[1]["messages"][1]["content"] + "<|im_end|>"
    assert decode(tokenizer, ids[:start]).endswith("<|im_start|>user\nhello<|im_end|>\n<|im_start|>assistant\n")
    assert decode(tokenizer, ids[end:]) == "\n"


def test_glaive_multi_turn_mask_token_by_token(tokenizer, datasets_dir: Path) -> None:
    data = canonical(datasets_dir, "glaive_toolcall_en_demo.json").select([GLAIVE_MULTI_CALL_ROW])
    messages = data[0]["messages"]
    assistant_turns = [m["content"] for m in messages if m["role"] == "assistant"]
    assert len(assistant_turns) == 6 and sum(t.startswith("<tool_call>\n") for t in assistant_turns) == 3
    tokenized, stats = tokenize_dataset(data, tokenizer, 4096, train_on_completions=True)
    ids, labels = tokenized[0]["input_ids"], tokenized[0]["labels"]
    assert stats.truncated_rows == 0
    full = decode(tokenizer, ids)
    rendered, extra = conversation(tokenizer, messages, data[0]["tools"])  # ChatML: the fallback block
    assert not extra and rendered[0]["content"].startswith("You have access to the following tools:\n<tools>\n")
    assert full == tokenizer.apply_chat_template(rendered, tokenize=False)
    runs = labelled_runs(labels)
    assert [decode(tokenizer, ids[a:b]) for a, b in runs] == [turn + "<|im_end|>" for turn in assistant_turns]
    for a, b in runs:  # the header before each run is not trained, and labels are the ids
        assert decode(tokenizer, ids[:a]).endswith("<|im_start|>assistant\n")
        assert labels[a:b] == ids[a:b]
    unlabelled = "".join(decode(tokenizer, [t]) for t, label in zip(ids, labels) if label == IGNORE)
    for message in rendered:
        if message["role"] != "assistant":
            assert f"<|im_start|>{message['role']}\n{message['content']}<|im_end|>" in unlabelled
    assert unlabelled.count("<|im_start|>assistant\n") == 6
    everything, _ = tokenize_dataset(data, tokenizer, 4096, train_on_completions=False)
    assert everything[0]["labels"] == everything[0]["input_ids"] == ids


def test_leading_assistant_turn_is_trained(tokenizer) -> None:
    data = messages_rows(
        [
            {"role": "assistant", "content": "Hello!"},
            {"role": "user", "content": "q"},
            {"role": "assistant", "content": "a"},
        ]
    )
    tokenized, _ = tokenize_dataset(data, tokenizer, 128, train_on_completions=True)
    ids, labels = tokenized[0]["input_ids"], tokenized[0]["labels"]
    runs = labelled_runs(labels)
    assert [decode(tokenizer, ids[a:b]) for a, b in runs] == ["Hello!<|im_end|>", "a<|im_end|>"]
    assert decode(tokenizer, ids[: runs[0][0]]).endswith("<|im_end|>\n<|im_start|>assistant\n")  # header not trained


@pytest.mark.parametrize("content", ["Hi there, I am your assistant.", "end", "trailing  ", "assistant"])
def test_a_row_with_only_a_leading_assistant_turn_is_kept(tokenizer, content: str) -> None:
    # "end" and "assistant" also occur in the end-of-turn token, the header and the default system prompt
    data = messages_rows(
        [{"role": "user", "content": "q"}, {"role": "assistant", "content": "a"}],
        [{"role": "assistant", "content": content}],
    )
    tokenized, stats = tokenize_dataset(data, tokenizer, 128, train_on_completions=True)
    assert (stats.rows, stats.dropped_rows) == (2, 0)
    ids, labels = tokenized[1]["input_ids"], tokenized[1]["labels"]
    assert decode(tokenizer, [t for t, label in zip(ids, labels) if label != IGNORE]) == content + "<|im_end|>"
    assert decode(tokenizer, ids).startswith(
        "<|im_start|>system\n"
    )  # the template's default system turn is not trained
    check_consistent(tokenized, stats, 128)


def test_a_leading_assistant_turn_the_template_cannot_place_is_an_error_naming_the_row(tiny_model_dir: Path) -> None:
    from trainer_core.models.loading import load_tokenizer

    strict = load_tokenizer(tiny_model_dir)
    strict.chat_template = (
        "{% if messages[0]['role'] != 'user' %}{{ raise_exception('Conversations must start with a user turn') }}{% endif %}"
        "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
    )
    ok = [{"role": "user", "content": "q"}, {"role": "assistant", "content": "a"}]
    leading = [
        {"role": "assistant", "content": "Hello!"},
        {"role": "user", "content": "q"},
        {"role": "assistant", "content": "a"},
    ]
    with pytest.raises(
        DatasetError,
        match=r"^row 2 starts with an assistant turn and the chat template of .* cannot render it so "
        r"that its tokens can be located \(it fails on this conversation: Conversations must start with a user "
        r"turn\): add the user turn before it or remove the row$",
    ):
        tokenize_dataset(messages_rows(ok, leading), strict, 128, train_on_completions=True)
    shouting = load_tokenizer(tiny_model_dir)  # changes the content, so it cannot be found in the rendering
    shouting.chat_template = (
        "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] | upper }}<|im_end|>\n{% endfor %}"
    )
    with pytest.raises(
        DatasetError, match=r"^row 1 starts with an assistant turn .*does not hold the content as written"
    ):
        tokenize_dataset(messages_rows(leading), shouting, 128, train_on_completions=True)


def test_text_rows_end_with_eos(tokenizer) -> None:
    data = datasets.Dataset.from_dict({"text": ["Hello world.", "Second document here."]})
    tokenized, stats = tokenize_dataset(data, tokenizer, 64, train_on_completions=True)
    assert tokenized[0]["input_ids"] == tokenizer("Hello world.")["input_ids"] + [tokenizer.eos_token_id]
    assert tokenized[0]["labels"] == tokenized[0]["input_ids"]
    assert stats.trained_tokens == stats.total_tokens == sum(len(ids) for ids in tokenized["input_ids"])


def test_truncation_is_counted(tokenizer, datasets_dir: Path) -> None:
    data = canonical(datasets_dir, "identity.json")
    whole, whole_stats = tokenize_dataset(data, tokenizer, 4096, train_on_completions=False)
    lengths = [len(ids) for ids in whole["input_ids"]]
    assert whole_stats.truncated_rows == whole_stats.truncated_tokens == 0
    cut, stats = tokenize_dataset(data, tokenizer, 40, train_on_completions=False)
    check_consistent(cut, stats, 40)
    assert stats.truncated_rows == sum(n > 40 for n in lengths) > 0
    assert stats.truncated_tokens == sum(n - 40 for n in lengths if n > 40)
    assert stats.total_tokens == sum(min(n, 40) for n in lengths)
    assert cut[0]["input_ids"] == whole[0]["input_ids"][:40]  # the start is kept


def test_rows_without_trained_tokens_are_dropped(tokenizer) -> None:
    long_prompt = [{"role": "user", "content": "word " * 200}, {"role": "assistant", "content": "ok"}]
    short = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]
    tokenized, stats = tokenize_dataset(
        messages_rows(long_prompt, short, long_prompt), tokenizer, 64, train_on_completions=True
    )
    assert (stats.rows, stats.dropped_rows, stats.truncated_rows) == (1, 2, 2)
    assert (
        decode(tokenizer, [t for t, label in zip(tokenized[0]["input_ids"], tokenized[0]["labels"]) if label != IGNORE])
        == "hello<|im_end|>"
    )
    with pytest.raises(
        DatasetError,
        match=r"^no row has a trained token within max_seq_length=64: 1 row\(s\) have their "
        r"assistant tokens after max_seq_length=64 tokens \(every prompt fills it; the first is row 1\): raise max_seq_length$",
    ):
        tokenize_dataset(messages_rows(long_prompt), tokenizer, 64, train_on_completions=True)


def test_no_trained_token_without_assistant_turns_does_not_blame_max_seq_length(tokenizer) -> None:
    user_only = [{"role": "user", "content": "hi"}]
    with pytest.raises(DatasetError) as caught:
        tokenize_dataset(messages_rows(user_only, user_only), tokenizer, 512, train_on_completions=True)
    assert str(caught.value) == (
        "no row has a trained token: 2 row(s) have no assistant turn to train on (the first is row 1); "
        "with train_on_completions only assistant turns are trained: add assistant turns or set "
        "train_on_completions=False"
    )
    long_prompt = [{"role": "user", "content": "word " * 200}, {"role": "assistant", "content": "ok"}]
    with pytest.raises(
        DatasetError,
        match=r"^no row has a trained token: 1 row\(s\) have no assistant turn to train on \(the first "
        r"is row 2\).*, and 1 row\(s\) have their assistant tokens after max_seq_length=64 tokens \(every prompt "
        r"fills it; the first is row 1\): add assistant turns or raise max_seq_length$",
    ):
        tokenize_dataset(messages_rows(long_prompt, user_only), tokenizer, 64, train_on_completions=True)
    empty_leading = [{"role": "assistant", "content": ""}, {"role": "user", "content": "hi"}]  # nothing to learn in it
    with pytest.raises(DatasetError, match=r"no assistant turn to train on \(the first is row 1\)"):
        tokenize_dataset(messages_rows(empty_leading), tokenizer, 512, train_on_completions=True)


def test_template_that_is_not_turn_by_turn(tokenizer, tiny_model_dir: Path) -> None:
    from trainer_core.models.loading import load_tokenizer

    odd = load_tokenizer(tiny_model_dir)
    odd.chat_template = (
        "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}{% if loop.last %} [end]{% endif %}<|im_end|>\n{% endfor %}"
        "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
    )
    data = messages_rows(
        [
            {"role": "user", "content": "q"},
            {"role": "assistant", "content": "a"},
            {"role": "user", "content": "r"},
            {"role": "assistant", "content": "b"},
        ]
    )
    with pytest.raises(
        DatasetError,
        match=rf"row 1: the chat template of {odd.name_or_path} renders the conversation cut after 1 turn\(s\) differently",
    ):
        tokenize_dataset(data, odd, 128, train_on_completions=True)
    tokenized, _ = tokenize_dataset(data, odd, 128, train_on_completions=False)  # the way out it names
    assert decode(odd, tokenized[0]["input_ids"]).endswith("b [end]<|im_end|>\n")


def test_template_that_fails_on_a_row(tiny_model_dir: Path) -> None:
    from trainer_core.models.loading import load_tokenizer

    strict = load_tokenizer(tiny_model_dir)
    strict.chat_template = (
        "{% for m in messages %}{% if m['content'] == 'boom' %}{{ raise_exception('no booms') }}{% endif %}"
        "{{ m['role'] }}: {{ m['content'] }}\n{% endfor %}"
    )
    ok = [{"role": "user", "content": "q"}, {"role": "assistant", "content": "a"}]
    bad = [{"role": "user", "content": "boom"}, {"role": "assistant", "content": "a"}]
    with pytest.raises(DatasetError, match="row 2: the chat template of .* cannot render this conversation: no booms"):
        tokenize_dataset(messages_rows(ok, bad), strict, 128, train_on_completions=True)


def test_several_processes_write_the_same_tokens_to_disk_and_name_a_bad_row_by_its_place(
    tiny_model_dir: Path, tmp_path: Path
) -> None:
    from trainer_core.data import progress
    from trainer_core.data.tokenization import encode_rows
    from trainer_core.models.loading import load_tokenizer

    strict = load_tokenizer(tiny_model_dir)
    strict.chat_template = (
        "{% for m in messages %}{% if m['content'] == 'boom' %}{{ raise_exception('no booms') }}{% endif %}"
        "<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
    )
    ok = [[{"role": "user", "content": f"q{i}"}, {"role": "assistant", "content": f"a{i}"}] for i in range(300)]
    rows = messages_rows(*ok)
    one = encode_rows(rows, strict, 32, True)
    heard: list[tuple[int, int, str]] = []
    progress.listen(lambda done, total, what: heard.append((done, total, what)))
    try:
        two = encode_rows(rows, strict, 32, True, num_proc=2, cache_file_name=str(tmp_path / "tokens.arrow"))
    finally:
        progress.listen(None)
    assert heard[-1] == (300, 300, "tokenized") and all(done <= 300 for done, _, _ in heard)  # told here, summed
    assert sorted(p.name for p in tmp_path.iterdir()) == ["tokens_00000_of_00002.arrow", "tokens_00001_of_00002.arrow"]
    assert two["input_ids"] == one["input_ids"] and two["labels"] == one["labels"] and two["trained"] == one["trained"]
    bad = [{"role": "user", "content": "boom"}, {"role": "assistant", "content": "a"}]
    with pytest.raises(DatasetError, match="^row 251: "):  # in the second process's half
        encode_rows(messages_rows(*ok[:250], bad, *ok[250:]), strict, 32, True, num_proc=2)
