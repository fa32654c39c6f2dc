"""Preference data as users bring it (``trainer_core.data.preference``): every layout read into TRL's
conversational pairs / unpaired rows, KTO unpairing, and each wrong data / method pairing refused
with a message naming the file and the fix. Token counts (``preference_tokens``) against counts
made by hand with the real tokenizer."""

from __future__ import annotations

import json

import pytest

from trainer_core.data.errors import DatasetError
from trainer_core.data.prepare import load_conversations
from trainer_core.data.preview import preview
from trainer_core.schemas import TrainingStartRequest
from trainer_core.vocabulary import FormatType, TrainingMethod


def _write(tmp_path, rows, name="data.json"):
    path = tmp_path / name
    path.write_text(json.dumps(rows), encoding="utf-8")
    return str(path)


def _load(path, method="dpo", **settings):
    return load_conversations(TrainingStartRequest(local_datasets=[path], training_method=method, **settings))


USER = {"role": "user", "content": "Name a colour."}


def test_sharegpt_pairs_as_in_the_shared_file(datasets_dir):
    rows, fmt = _load(str(datasets_dir / "dpo_en_demo.json"))
    assert fmt == FormatType.preference and len(rows) == 300
    raw = json.loads((datasets_dir / "dpo_en_demo.json").read_text(encoding="utf-8"))[7]
    assert rows[7]["prompt"][-1] == {"role": "user", "content": raw["conversations"][-1]["value"]}
    assert rows[7]["chosen"] == [{"role": "assistant", "content": raw["chosen"]["value"]}]
    assert rows[7]["rejected"] == [{"role": "assistant", "content": raw["rejected"]["value"]}]


@pytest.mark.parametrize(
    "row",
    [
        {"prompt": "Name a colour.", "chosen": "Blue.", "rejected": "No."},
        {
            "prompt": [USER],
            "chosen": [{"role": "assistant", "content": "Blue."}],
            "rejected": [{"role": "assistant", "content": "No."}],
        },
        {"messages": [USER], "chosen": {"role": "assistant", "content": "Blue."}, "rejected": "No."},
        # TRL's implicit prompt: both answers carry the whole conversation
        {
            "chosen": [USER, {"role": "assistant", "content": "Blue."}],
            "rejected": [USER, {"role": "assistant", "content": "No."}],
        },
        # the answers repeat the prompt's turns
        {
            "prompt": [USER],
            "chosen": [USER, {"role": "assistant", "content": "Blue."}],
            "rejected": [USER, {"role": "assistant", "content": "No."}],
        },
    ],
)
def test_every_pair_layout_gives_the_same_pair(tmp_path, row):
    rows, fmt = _load(_write(tmp_path, [row]))
    assert fmt == FormatType.preference
    assert rows[0] == {
        "prompt": [USER],
        "chosen": [{"role": "assistant", "content": "Blue."}],
        "rejected": [{"role": "assistant", "content": "No."}],
    }


def test_system_field_numbers_and_content_parts_are_read_as_for_sft(tmp_path):
    row = {
        "system": "Be brief.",
        "prompt": [{"role": "user", "content": [{"type": "text", "text": "Count."}]}],
        "chosen": 3,
        "rejected": "many",
    }
    rows, _ = _load(_write(tmp_path, [row]))
    assert rows[0]["prompt"] == [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Count."}]
    assert rows[0]["chosen"] == [{"role": "assistant", "content": "3"}]


def test_kto_reads_labelled_rows_and_unpairs_pairs(tmp_path, datasets_dir):
    labelled = [
        {"prompt": "Name a colour.", "completion": "Blue.", "label": True},
        {"messages": [USER, {"role": "assistant", "content": "No."}], "label": "false"},
    ]
    rows, fmt = _load(_write(tmp_path, labelled[:1]), "kto")
    assert fmt == FormatType.unpaired and rows[0]["label"] is True
    rows, _ = _load(_write(tmp_path, labelled[1:], "m.json"), "kto")
    assert rows[0] == {"prompt": [USER], "completion": [{"role": "assistant", "content": "No."}], "label": False}
    rows, fmt = _load(str(datasets_dir / "dpo_en_demo.json"), "kto")
    assert len(rows) == 600 and rows["label"][:4] == [True, False, True, False]


@pytest.mark.parametrize(
    "method, file, message",
    [
        (
            "dpo",
            "alpaca_en_demo.json",
            r"alpaca_en_demo.json has columns .*supervised \(SFT\) data.*DPO needs pairs.*training_method 'sft'",
        ),
        ("orpo", "c4_demo.jsonl", r"c4_demo.jsonl .*ORPO needs pairs"),
        ("kto", "identity.json", r"identity.json .*KTO needs rows with a desirable/undesirable label"),
        (
            "sft",
            "dpo_en_demo.json",
            r"dpo_en_demo.json holds preference pairs.*choose training_method dpo, orpo or kto",
        ),
    ],
)
def test_each_wrong_pairing_of_data_and_method_is_refused(datasets_dir, method, file, message):
    with pytest.raises(DatasetError, match=message):
        _load(str(datasets_dir / file), method)


def test_unpaired_rows_are_refused_for_dpo_and_bad_rows_are_named(tmp_path):
    kto = _write(tmp_path, [{"prompt": "a", "completion": "b", "label": True}])
    with pytest.raises(
        DatasetError, match=r"unpaired rows with a 'label' \(KTO data\), but DPO.*use training_method 'kto'"
    ):
        _load(kto, "dpo")
    bad = _write(
        tmp_path,
        [{"prompt": "a", "chosen": "b", "rejected": "c"}, {"prompt": "a", "chosen": "", "rejected": "c"}],
        "bad.json",
    )
    with pytest.raises(DatasetError, match=r"bad.json, row 2: field 'chosen' is empty"):
        _load(bad)
    label = _write(tmp_path, [{"prompt": "a", "completion": "b", "label": "maybe"}], "label.json")
    with pytest.raises(DatasetError, match=r"label.json, row 1: field 'label' is 'maybe': give true"):
        _load(label, "kto")
    one_side = _write(tmp_path, [{"prompt": "a", "chosen": "b"}], "side.json")
    with pytest.raises(DatasetError, match=r"has a 'chosen' column but no 'rejected' column"):
        _load(one_side)
    ends = _write(
        tmp_path,
        [{"prompt": [USER, {"role": "assistant", "content": "x"}], "chosen": "b", "rejected": "c"}],
        "ends.json",
    )
    with pytest.raises(DatasetError, match=r"ends.json, row 1: field 'prompt' ends with a assistant turn"):
        _load(ends)


def test_format_type_must_fit_the_method(datasets_dir):
    path = str(datasets_dir / "dpo_en_demo.json")
    with pytest.raises(DatasetError, match="format_type 'alpaca' is SFT data, but training_method 'dpo'"):
        _load(path, format_type="alpaca")
    with pytest.raises(DatasetError, match="format_type 'preference' is preference data: choose training_method"):
        _load(str(datasets_dir / "alpaca_en_demo.json"), "sft", format_type="preference")


def test_preview_shows_prompt_and_answers(datasets_dir):
    fmt, table = preview(str(datasets_dir / "dpo_en_demo.json"), rows=2, method=TrainingMethod.dpo)
    assert fmt == FormatType.preference and table.columns.tolist() == ["row", "prompt", "chosen", "rejected"]
    assert table["prompt"][0].startswith("user: Hi! I'd like to create a new language game")


def test_token_counts_match_the_chat_template_by_hand(tmp_path, tiny_model_dir):
    """One pair: prompt tokens = the template with the generation prompt; each answer = what follows;
    cut at max_seq_length from the end, and a prompt that fills it drops the pair."""
    from transformers import AutoTokenizer

    from trainer_core.data.tokenization import encode_rows, tokenize_dataset

    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    row = {"prompt": "Name a colour.", "chosen": "Blue, like the sky on a clear day.", "rejected": "No."}
    rows, _ = _load(_write(tmp_path, [row]))
    prompt = tokenizer.apply_chat_template(rows[0]["prompt"], tokenize=False, add_generation_prompt=True)
    full = tokenizer.apply_chat_template(rows[0]["prompt"] + rows[0]["chosen"], tokenize=False)
    n_prompt = len(tokenizer(prompt, add_special_tokens=False)["input_ids"])
    n_chosen = len(tokenizer(full, add_special_tokens=False)["input_ids"]) - n_prompt
    encoded = encode_rows(rows, tokenizer, 512, True)[0]
    assert encoded["full_length"] == n_prompt + n_chosen and encoded["trained"] == n_chosen
    assert encoded["labels"][:n_prompt] == [-100] * n_prompt and -100 not in encoded["labels"][n_prompt:]
    cut = encode_rows(rows, tokenizer, n_prompt + 3, True)[0]
    assert cut["trained"] == 3 and cut["trainable"] == n_chosen
    with pytest.raises(DatasetError, match="no row has a trained token"):
        tokenize_dataset(rows, tokenizer, n_prompt, True)


def test_evaluation_scores_a_preference_run_on_its_preferred_answers(datasets_dir):
    from trainer_core.data.preference import preferred_conversations

    pairs, _ = _load(str(datasets_dir / "dpo_en_demo.json"))
    chats = preferred_conversations(pairs)
    assert len(chats) == 300 and chats[0]["messages"] == pairs[0]["prompt"] + pairs[0]["chosen"]
    unpaired, _ = _load(str(datasets_dir / "dpo_en_demo.json"), "kto")
    assert preferred_conversations(unpaired)["messages"] == chats["messages"]  # the undesirable half is left out


def test_method_settings_on_the_schema():
    from pydantic import ValidationError

    base = dict(local_datasets=["x.json"])
    assert TrainingStartRequest(**base, training_method="dpo").learning_rate == 5e-5  # unless set
    assert TrainingStartRequest(**base, training_method="dpo", learning_rate=1e-4).learning_rate == 1e-4
    assert TrainingStartRequest(**base).learning_rate == 1e-3
    with pytest.raises(ValidationError, match="turn packing off"):
        TrainingStartRequest(**base, training_method="orpo", packing=True)
    with pytest.raises(ValidationError, match="adapter_name_or_path continues a LoRA adapter"):
        TrainingStartRequest(**base, training_type="full", adapter_name_or_path="/a")
    with pytest.raises(ValidationError, match="beta"):
        TrainingStartRequest(**base, training_method="dpo", beta=0)
    with pytest.raises(ValidationError, match="loss_type"):
        TrainingStartRequest(**base, training_method="dpo", loss_type="made_up")


def test_custom_mapping_names_the_preference_columns(tmp_path):
    path = _write(tmp_path, [{"question": "Name a colour.", "good": "Blue.", "bad": "No."}])
    rows, fmt = _load(path, custom_format_mapping={"prompt": "question", "chosen": "good", "rejected": "bad"})
    assert fmt == FormatType.preference and rows[0]["chosen"] == [{"role": "assistant", "content": "Blue."}]
