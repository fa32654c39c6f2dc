"""Each document kind to text through markitdown (PDF, DOCX, HTML) or as it is (Markdown, text),
written in the test from the shared Alpaca outputs; a scan and broken files refused by name and
code; folders and paths through the studio's path check."""

from __future__ import annotations

import pytest

from tests.support.documents import (
    alpaca_paragraphs,
    write_docx,
    write_html,
    write_markdown,
    write_pdf,
    write_scanned_pdf,
)
from trainer_core.paths import PathNotAllowed
from trainer_core.recipes.errors import NO_TEXT_LAYER, UNREADABLE_DOCUMENT, UNSUPPORTED_DOCUMENT, SourceError
from trainer_core.recipes.gates import normalised
from trainer_core.recipes.sources.convert import document_files, document_text


@pytest.fixture(scope="module")
def paragraphs(datasets_dir) -> list[str]:
    return alpaca_paragraphs(datasets_dir, 6)


def _all_found(paragraphs: list[str], text: str) -> bool:
    plain = normalised(text.replace("*", ""))
    return all(normalised(p) in plain for p in paragraphs)


def test_text_pdf_gives_its_paragraphs(tmp_path, paragraphs):
    written = write_pdf(tmp_path / "manual.pdf", paragraphs)
    assert _all_found(written, document_text(tmp_path / "manual.pdf"))


@pytest.mark.parametrize("writer", [write_docx, write_html, write_markdown])
def test_docx_html_markdown_give_heading_and_paragraphs(tmp_path, paragraphs, writer):
    suffix = {write_docx: ".docx", write_html: ".html", write_markdown: ".md"}[writer]
    writer(tmp_path / f"notes{suffix}", paragraphs, title="Kitchen notes")
    text = document_text(tmp_path / f"notes{suffix}")
    assert "# Kitchen notes" in text and _all_found(paragraphs, text)
    assert "hidden" not in text  # the HTML page's script is not text


def test_plain_text_is_read_as_it_is(tmp_path):
    (tmp_path / "a.txt").write_text("line one\n\nline two\n", encoding="utf-8")
    assert document_text(tmp_path / "a.txt") == "line one\n\nline two\n"


def test_scanned_pdf_is_refused_as_having_no_text_layer(tmp_path):
    write_scanned_pdf(tmp_path / "scan.pdf")
    with pytest.raises(SourceError) as refused:
        document_text(tmp_path / "scan.pdf")
    assert refused.value.code == NO_TEXT_LAYER and "no text layer: 'scan.pdf'" in str(refused.value)
    assert refused.value.fields == ("documents",)


@pytest.mark.parametrize(
    "name, content, kind",
    [
        ("cut.pdf", b"%PDF-1.4\n1 0 obj <<", "PDF"),
        ("fake.pdf", b"plain words", "PDF"),
        ("bad.docx", b"PK not a zip", "DOCX"),
    ],
)
def test_broken_files_are_refused_by_name_not_read_as_text(tmp_path, name, content, kind):
    (tmp_path / name).write_bytes(content)
    with pytest.raises(SourceError) as refused:
        document_text(tmp_path / name)
    assert refused.value.code == UNREADABLE_DOCUMENT
    assert str(refused.value).startswith(f"documents: '{name}' cannot be read as {kind} (")


def test_other_suffixes_non_utf8_and_empty_files_are_refused(tmp_path):
    (tmp_path / "a.xlsx").write_bytes(b"x")
    (tmp_path / "latin.txt").write_bytes("caf\xe9".encode("latin-1"))
    (tmp_path / "blank.md").write_text("  \n", encoding="utf-8")
    with pytest.raises(SourceError) as refused:
        document_text(tmp_path / "a.xlsx")
    assert refused.value.code == UNSUPPORTED_DOCUMENT
    with pytest.raises(SourceError, match="'latin.txt' is not UTF-8 text"):
        document_text(tmp_path / "latin.txt")
    with pytest.raises(SourceError, match="'blank.md' holds no text"):
        document_text(tmp_path / "blank.md")


def test_folders_list_their_documents_and_paths_stay_inside_the_allowed_folders(tmp_path):
    docs = tmp_path / "docs"
    (docs / "sub").mkdir(parents=True)
    for name in ("b.md", "a.txt", "sub/c.html", "skip.png"):
        (docs / name).write_text("x", encoding="utf-8")
    assert [p.name for p in document_files([str(docs)], [tmp_path])] == ["a.txt", "b.md", "c.html"]
    assert [p.name for p in document_files([str(docs / "b.md"), str(docs)], [tmp_path])][0] == "b.md"
    with pytest.raises(PathNotAllowed):
        document_files([str(docs / ".." / ".." / "elsewhere.md")], [tmp_path])
    (docs / "link.md").symlink_to("/etc/hostname")
    with pytest.raises(PathNotAllowed):
        document_files([str(docs / "link.md")], [tmp_path])
    with pytest.raises(SourceError) as missing:
        document_files([str(docs / "none.md")], [tmp_path])
    assert missing.value.code == "missing_files"
    (tmp_path / "empty").mkdir()
    with pytest.raises(SourceError, match="holds no documents"):
        document_files([str(tmp_path / "empty")], [tmp_path])
