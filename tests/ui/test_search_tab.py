"""The Search tab's pieces without a browser: the ranked table (tuned beside base, the rank change),
the passages typed and read from a file in the allowed folders, a refusal in the page's words."""

from __future__ import annotations

import numpy as np
import pytest

from trainer_core.refusals import Refusal
from trainer_core.serving.errors import ChatInputError
from trainer_core.serving.search import SearchResult, ranking
from trainer_core.settings import Settings
from ui.search_tab import COMPARED, in_words, passages_of, table

QUERY = np.array([1.0, 0.0])


def test_the_table_ranks_tuned_beside_base_with_the_rank_change():
    tuned = ranking(QUERY, np.array([[0.0, 1.0], [1.0, 0.0], [1.0, 1.0]]))  # b, c, a
    base = ranking(QUERY, np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]]))  # a, c, b
    shown = table(SearchResult(tuned=tuned, base=base, query_prompt=None), ["a", "b", "c"])
    assert list(shown.columns) == COMPARED
    assert shown.values.tolist() == [
        [1, "b", 1.0, 3, 0.0, "▲ 2"],
        [2, "c", 0.7071, 2, 0.7071, "="],
        [3, "a", 0.0, 1, 1.0, "▼ 2"],
    ]
    alone = table(SearchResult(tuned=tuned, base=None, query_prompt=None), ["a", "b", "c"])
    assert alone.values.tolist() == [[1, "b", 1.0], [2, "c", 0.7071], [3, "a", 0.0]]


def test_passages_are_typed_lines_then_the_files_lines(tmp_path):
    allowed, outside = tmp_path / "allowed", tmp_path / "outside"
    for folder in (allowed, outside):
        folder.mkdir()
        (folder / "p.txt").write_text("one\n\n  two  \n")
    settings = Settings(data_dir=tmp_path / "data", allowed_paths=str(allowed))
    assert passages_of("x\n \ny", str(allowed / "p.txt"), settings) == ["x", "y", "one", "two"]
    assert passages_of(None, None, settings) == []
    (allowed / "bad.txt").write_bytes(b"\xff\xfe\x00")
    (allowed / "link.txt").symlink_to(outside / "p.txt")
    for path, words in (
        (outside / "p.txt", "Passages file: "),
        (allowed / "link.txt", "outside the allowed folders"),
        (allowed, "Passages file: no file at"),
        (allowed / "bad.txt", "not a UTF-8 text file"),
    ):
        with pytest.raises(Refusal, match=words) as refused:
            passages_of("", str(path), settings)
        assert refused.value.fields == ("passages_file",)


def test_a_refusal_names_the_field_by_its_label():
    assert in_words(ChatInputError("passages: passage 2 is empty", fields=("passages",))) == (
        "Passages: passage 2 is empty"
    )
    assert in_words(ChatInputError("compare: no", fields=("compare",))) == "Tuned beside base: no"
    assert in_words(ChatInputError("model 'x': no such model", fields=("model",))) == "Model: model 'x': no such model"
    assert in_words(ChatInputError("A training job is running")) == "A training job is running"
