"""Documents made in the test from the shared Alpaca outputs, one writer each: a text PDF (fpdf2),
an image-only PDF (a scan: no text layer), a DOCX (python-docx), HTML, Markdown and plain text."""

from __future__ import annotations

import json
from pathlib import Path

from PIL import Image


def alpaca_paragraphs(datasets_dir: Path, count: int) -> list[str]:
    """The first ``count`` non-empty Alpaca outputs as paragraphs, cut to the characters the PDF's
    core fonts can write (Latin-1) and joined onto one line each."""
    rows = json.loads((datasets_dir / "alpaca_en_demo.json").read_text(encoding="utf-8"))
    found = []
    for row in rows:
        text = " ".join(row["output"].split()).encode("latin-1", "ignore").decode("latin-1")
        if len(text) > 80:
            found.append(text)
        if len(found) == count:
            break
    return found


def write_pdf(path: Path, paragraphs: list[str], pages: int = 0) -> list[str]:
    """A text PDF of ``paragraphs`` (one after another, wrapped by the page); with ``pages``, as many
    paragraphs as fill that many pages. Returns the paragraphs written."""
    from fpdf import FPDF

    pdf = FPDF()
    pdf.set_font("Helvetica", size=11)
    pdf.add_page()
    written = []
    for text in paragraphs:
        if pages and pdf.page_no() >= pages and pdf.get_y() > 240:
            break
        pdf.multi_cell(0, 5, text)
        pdf.ln(3)
        written.append(text)
    pdf.output(str(path))
    return written


def write_scanned_pdf(path: Path) -> None:
    """A PDF whose one page is a picture (a scan without OCR): no text layer."""
    from fpdf import FPDF

    picture = path.with_suffix(".png")
    Image.new("RGB", (400, 200), "white").save(picture)
    pdf = FPDF()
    pdf.add_page()
    pdf.image(str(picture), x=10, y=10, w=180)
    pdf.output(str(path))
    picture.unlink()


def write_docx(path: Path, paragraphs: list[str], title: str = "Notes") -> None:
    """A DOCX with a heading and ``paragraphs``."""
    import docx

    document = docx.Document()
    document.add_heading(title, level=1)
    for text in paragraphs:
        document.add_paragraph(text)
    document.save(str(path))


def write_html(path: Path, paragraphs: list[str], title: str = "Notes") -> None:
    """An HTML page with a script (not text to keep), a heading and ``paragraphs``."""
    body = "".join(f"<p>{text}</p>\n" for text in paragraphs)
    path.write_text(
        f"<html><head><title>{title}</title><script>var hidden = 1;</script></head>"
        f"<body><h1>{title}</h1>\n{body}</body></html>",
        encoding="utf-8",
    )


def write_markdown(path: Path, paragraphs: list[str], title: str = "Notes") -> None:
    """A Markdown file: a heading, then ``paragraphs`` separated by blank lines."""
    path.write_text(f"# {title}\n\n" + "\n\n".join(paragraphs) + "\n", encoding="utf-8")
