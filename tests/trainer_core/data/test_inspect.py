"""The Train form's dataset check on the real shared files: row counts, the Markdown sample,
truncation counts against a brute-force count with the real SmolLM2 tokenizer, placeholders and
the advice's commands (run on a copy), and the offline preview tokenizer."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from trainer_core.data import inspect as inspect_module
from trainer_core.data.files import DatasetError, read_file
from trainer_core.data.formats import normalize
from trainer_core.data.inspect import inspect_dataset, load_preview_tokenizer, placeholder_advice, token_lengths
from trainer_core.data.placeholders import find_placeholders
from trainer_core.data.preview_cells import TURN_CHARS
from trainer_core.data.tokenization import tokenize_dataset
from trainer_core.request.model import DEFAULT_MODEL
from trainer_core.settings import Settings
from trainer_core.vocabulary import FormatType

REAL_FILES = {  # file -> (format, rows), from ../shared/datasets/README.md
    "alpaca_en_demo.json": (FormatType.alpaca, 999),
    "identity.json": (FormatType.alpaca, 91),
    "glaive_toolcall_en_demo.json": (FormatType.sharegpt, 300),
    "c4_demo.jsonl": (FormatType.text, 300),
}


def turn_blocks(cell: str) -> list[str]:
    """The ``**role:** content`` blocks of a sample cell (content may hold blank lines, but never an
    unescaped ``**``)."""
    return re.split(r"\n\n(?=\*\*\w+:\*\* )", cell)


def brute_force_lengths(tokenizer, path: Path) -> list[int]:
    """Token count of each row, one row at a time, through tokenize=True (no shared code path)."""
    canonical = normalize(read_file(str(path)), FormatType.auto, path.name)
    if "text" in canonical.column_names:
        return [len(tokenizer(text)["input_ids"]) + 1 for text in canonical["text"]]  # + eos, as training adds
    return [
        len(tokenizer.apply_chat_template(m, tokenize=True, return_dict=True)["input_ids"])
        for m in canonical["messages"]
    ]


@pytest.mark.parametrize("name", sorted(REAL_FILES))
def test_real_files_format_rows_and_sample(datasets_dir: Path, name: str) -> None:
    fmt, rows = REAL_FILES[name]
    found = inspect_dataset(str(datasets_dir / name), rows=3)
    assert (found.format, found.rows_total, found.truncation) == (fmt, rows, None)
    column = "text" if fmt == FormatType.text else "conversation"
    assert list(found.sample.columns) == ["row", column]
    assert list(found.sample["row"]) == [1, 2, 3]


def test_sample_is_markdown_turns(datasets_dir: Path) -> None:
    first = json.loads((datasets_dir / "alpaca_en_demo.json").read_text())[0]
    cell = inspect_dataset(str(datasets_dir / "alpaca_en_demo.json"), rows=1).sample["conversation"][0]
    blocks = turn_blocks(cell)
    assert blocks[0].startswith("**user:** ") and blocks[-1].startswith("**assistant:** ")
    assert first["instruction"][:40] in cell.replace("  \n", "\n")


def test_sample_shows_system_cuts_and_escapes(datasets_dir: Path) -> None:
    cell = inspect_dataset(str(datasets_dir / "glaive_toolcall_en_demo.json"), rows=1).sample["conversation"][0]
    blocks = turn_blocks(cell)
    assert blocks[0] == "**tools:** search\\_recipes"  # the functions by name; the call and result as such
    assert blocks[4].startswith("**assistant:** call search\\_recipes {") and blocks[5].startswith("**result:** {")
    assert blocks[5].endswith("…")  # the result is longer than 300 characters
    assert "<tool" not in cell
    assert [b.split(":**")[0] for b in blocks][:3] == ["**tools", "**user", "**assistant"]
    unescaped = [re.sub(r"\\(.)", r"\1", b.split(":** ", 1)[1]).replace("  \n", "\n") for b in blocks]
    assert max(len(text) for text in unescaped) <= TURN_CHARS


def test_text_rows_are_cut(datasets_dir: Path) -> None:
    text = inspect_dataset(str(datasets_dir / "c4_demo.jsonl"), rows=2).sample["text"][0]
    assert text.endswith("…") and len(re.sub(r"\\(.)", r"\1", text)) == TURN_CHARS


@pytest.mark.parametrize("name", ["dpo_en_demo.json", "missing.json"])
def test_unusable_files_raise(datasets_dir: Path, name: str) -> None:
    with pytest.raises(DatasetError):
        inspect_dataset(str(datasets_dir / name))


def test_bad_row_and_bad_json_raise(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text('[{"instruction": "hi", "output": "x"}, {"instruction": "q", "output": ""}]')
    with pytest.raises(DatasetError, match="row 2"):
        inspect_dataset(str(bad))
    broken = tmp_path / "broken.jsonl"
    broken.write_text('{"text": "a"}\n{"text": \n')
    with pytest.raises(DatasetError, match="broken.jsonl"):
        inspect_dataset(str(broken))


def test_mapping(tmp_path: Path) -> None:
    path = tmp_path / "qa.jsonl"
    path.write_text("".join(json.dumps({"question": f"q{i}", "answer": f"a{i}"}) + "\n" for i in range(7)))
    found = inspect_dataset(str(path), mapping={"instruction": "question", "output": "answer"}, rows=2)
    assert (found.format, found.rows_total) == (FormatType.alpaca, 7)
    assert found.sample["conversation"][1] == "**user:** q1\n\n**assistant:** a1"


def test_placeholders_in_identity(datasets_dir: Path) -> None:
    rows = json.loads((datasets_dir / "identity.json").read_text())
    expected = {
        name: sum(any(f"{{{{{name}}}}}" in v for v in row.values()) for row in rows) for name in ("author", "name")
    }
    found = inspect_dataset(str(datasets_dir / "identity.json"))
    assert [(p.name, p.rows) for p in found.placeholders] == sorted(expected.items())
    assert expected["name"] > 50 and expected["author"] > 50
    assert "{{name}}" in found.advice and "braces literally" in found.advice
    assert inspect_dataset(str(datasets_dir / "alpaca_en_demo.json")).placeholders == []


def test_placeholders_nested_and_spaced() -> None:
    rows = [
        {"conversations": [{"from": "human", "value": "hi {{ user_name }}"}], "system": "I am {{bot}}"},
        {"conversations": [{"from": "gpt", "value": "{{bot}} {{bot}} {single} {{ }}"}]},
    ]
    assert [(p.name, p.rows) for p in find_placeholders(rows)] == [("bot", 2), ("user_name", 1)]


@pytest.mark.parametrize("tool", ["sed", "python3"])
@pytest.mark.parametrize("name", ["my identity.json", "it's $(touch PWNED) `touch PWNED2`.json"])
def test_advice_commands_fill_a_copy(datasets_dir: Path, tmp_path: Path, tool: str, name: str) -> None:
    copy = tmp_path / name  # a space, quotes and shell syntax: the path must stay text
    shutil.copy(datasets_dir / "identity.json", copy)
    advice = placeholder_advice(["author", "name"], str(copy))
    command = next(line for line in advice.splitlines() if line.startswith(tool))
    if tool == "sed" and shutil.which("sed") is None:
        pytest.skip("no sed here")
    subprocess.run(command, shell=True, check=True, executable="/bin/bash", cwd=tmp_path)
    assert not (tmp_path / "PWNED").exists() and not (tmp_path / "PWNED2").exists()
    rows = json.loads(copy.read_text(encoding="utf-8"))  # still valid JSON
    assert find_placeholders(rows) == []
    assert "YOUR_NAME" in rows[0]["output"] and "YOUR_AUTHOR" in rows[0]["output"]
    assert placeholder_advice([], str(copy)) == ""


def test_pattern_characters_in_a_file_name_read_only_that_file(datasets_dir: Path, tmp_path: Path) -> None:
    """datasets reads data_files as patterns: a file named ``*.json`` must not pull in its neighbours."""
    rows = json.loads((datasets_dir / "identity.json").read_text())
    (tmp_path / "*.json").write_text(json.dumps(rows[:2]))
    (tmp_path / "zz-other.json").write_text(json.dumps(rows[:5]))
    (tmp_path / "train [v2].json").write_text(json.dumps(rows[:3]))
    assert len(read_file(str(tmp_path / "*.json"))) == 2
    assert len(read_file(str(tmp_path / "train [v2].json"))) == 3


def test_truncation_matches_brute_force(datasets_dir: Path, tokenizer) -> None:
    path = datasets_dir / "alpaca_en_demo.json"
    lengths = brute_force_lengths(tokenizer, path)
    over = [row for row, n in enumerate(lengths, start=1) if n > 128]
    report = inspect_dataset(str(path), tokenizer=tokenizer, max_seq_length=128).truncation
    assert (report.rows_checked, report.all_rows_checked, report.max_seq_length) == (999, True, 128)
    assert report.rows_over == len(over) and 0 < len(over) < 999
    assert report.first_rows == over[:5]
    assert (report.longest_tokens, report.longest_row) == (max(lengths), lengths.index(max(lengths)) + 1)


def test_truncation_agrees_with_training_counts(datasets_dir: Path, tokenizer) -> None:
    for name in ("glaive_toolcall_en_demo.json", "c4_demo.jsonl"):
        canonical = normalize(read_file(str(datasets_dir / name)), FormatType.auto, name)
        _, stats = tokenize_dataset(canonical, tokenizer, 256, train_on_completions=False)
        report = inspect_dataset(str(datasets_dir / name), tokenizer=tokenizer, max_seq_length=256).truncation
        assert report.rows_over == stats.truncated_rows > 0, name
    assert token_lengths(canonical, tokenizer) == brute_force_lengths(tokenizer, datasets_dir / "c4_demo.jsonl")


def test_truncation_of_the_first_rows_only(datasets_dir: Path, tokenizer) -> None:
    path = datasets_dir / "alpaca_en_demo.json"
    over = [row for row, n in enumerate(brute_force_lengths(tokenizer, path)[:100], start=1) if n > 128]
    found = inspect_dataset(str(path), tokenizer=tokenizer, max_seq_length=128, check_rows=100)
    assert found.rows_total == 999
    assert (found.truncation.rows_checked, found.truncation.all_rows_checked) == (100, False)
    assert found.truncation.rows_over == len(over)


def test_large_file_reads_its_start_only(datasets_dir: Path, monkeypatch: pytest.MonkeyPatch, tokenizer) -> None:
    monkeypatch.setattr(inspect_module, "FULL_READ_BYTES", 0)
    found = inspect_dataset(str(datasets_dir / "identity.json"), tokenizer=tokenizer, max_seq_length=64, check_rows=10)
    assert found.rows_total is None and found.truncation.rows_checked == 10
    head = json.loads((datasets_dir / "identity.json").read_text())[:10]
    expected = {name: sum(f"{{{{{name}}}}}" in row["output"] for row in head) for name in ("author", "name")}
    assert {p.name: p.rows for p in found.placeholders} == expected


def test_preview_tokenizer_offline(tiny_model_dir: Path, tmp_path: Path) -> None:
    settings = Settings(data_dir=tmp_path / "data", allowed_paths=str(tiny_model_dir.parent))
    by_id = load_preview_tokenizer(DEFAULT_MODEL, settings)  # the HF cache, else the bundled copy
    assert by_id is not None and by_id.chat_template
    assert load_preview_tokenizer(DEFAULT_MODEL, settings) is by_id  # kept in memory
    assert load_preview_tokenizer(str(tiny_model_dir), settings) is not None  # a folder inside an allowed one
    elsewhere = Settings(data_dir=tmp_path / "data", models_dir=tmp_path / "models")
    assert load_preview_tokenizer(str(tiny_model_dir), elsewhere) is None  # outside the allowed folders
    for name in ("nobody-here/no-such-model-xyz", "not a hub id", "", str(tmp_path / "data" / "nothing")):
        assert load_preview_tokenizer(name, settings) is None


def test_inspect_without_gradio_or_torch() -> None:
    code = (
        "import sys; from trainer_core.data.inspect import inspect_dataset; "
        "print(any(m in sys.modules for m in ('gradio', 'torch')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_preview_tokenizer_from_the_hf_cache(
    tiny_model_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import huggingface_hub.constants

    from tests.support.fake_hub_cache import fake_hub_repo

    cache = tmp_path / "hf-cache"
    files = {
        name: (tiny_model_dir / name).read_bytes()
        for name in ("config.json", "tokenizer.json", "tokenizer_config.json")
    }
    fake_hub_repo(cache, "acme/tiny-chat", files)  # no chat template: ChatML is added, as training does
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(cache))
    tokenizer = load_preview_tokenizer(
        "acme/tiny-chat", Settings(data_dir=tmp_path / "data", models_dir=tmp_path / "m")
    )
    assert tokenizer is not None and "<|im_start|>" in tokenizer.chat_template
    # a model in neither the cache nor the bundle: none (the bundled default model reads its tokenizer
    # from the GGUF even before it is built: tests/e2e/test_fresh_install.py)
    assert (
        load_preview_tokenizer("acme/not-cached", Settings(data_dir=tmp_path / "data", models_dir=tmp_path / "m"))
        is None
    )
