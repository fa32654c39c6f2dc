"""Document converters for data recipes (issue 52): markitdown (``markitdown[pdf,docx]``, MIT, the
app's choice, through ``recipes.sources.convert``) against pymupdf4llm (in ``pymupdf`` 2.x, AGPL: measured only where it imports, after
``pip install --no-deps --target DIR pymupdf==2.0 pymupdf4llm==2.0 pymupdf_layout==2.0`` and
``PYTHONPATH=DIR``). On documents written here from the shared Alpaca outputs (a 20-page text PDF,
a DOCX, an HTML page): seconds a file (median), and quality as the share of the source paragraphs
found whole in the text (whitespace normalised) and the similarity of the two texts (rapidfuzz
``ratio``, 0-100, markup stripped)."""

from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Optional

from tests.support.documents import alpaca_paragraphs, write_docx, write_html, write_pdf

DATASETS = Path(__file__).resolve().parents[1].parent / "shared" / "datasets"


def _markitdown() -> Callable[[Path], str]:
    """The app's own conversion (``recipes.sources.convert``: markitdown's converters)."""
    from trainer_core.recipes.sources.convert import document_text

    return document_text


def _pymupdf4llm() -> Optional[Callable[[Path], str]]:
    try:
        import pymupdf4llm
    except ImportError:
        return None
    return lambda path: pymupdf4llm.to_markdown(str(path)) if path.suffix == ".pdf" else None


def _plain(text: str) -> str:
    """``text`` without Markdown emphasis and headings, whitespace collapsed."""
    return " ".join(re.sub(r"[*_#`]+", " ", text).split())


def quality(paragraphs: list[str], text: str) -> dict[str, float]:
    """Share of ``paragraphs`` found whole in ``text`` and the texts' similarity (0-100)."""
    from rapidfuzz import fuzz

    plain = _plain(text)
    found = sum(_plain(p) in plain for p in paragraphs)
    return {
        "paragraphs_found": found / len(paragraphs),
        "similarity": round(fuzz.ratio(_plain(" ".join(paragraphs)), plain), 1),
    }


def measure(convert: Callable[[Path], Any], path: Path, paragraphs: list[str], repeats: int) -> Optional[dict]:
    """Seconds (median of ``repeats``) and ``quality`` of one converter on one file."""
    times, text = [], None
    for _ in range(repeats):
        began = time.perf_counter()
        text = convert(path)
        times.append(time.perf_counter() - began)
        if text is None:
            return None
    return {"seconds": round(statistics.median(times), 3), "chars": len(text), **quality(paragraphs, text)}


def main(argv: Optional[list[str]] = None) -> dict:
    """Write the documents, convert each with each converter, print the JSON line and a summary."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="2 PDF pages, one pass")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args(argv)
    repeats = 1 if args.quick else args.repeats
    source = alpaca_paragraphs(DATASETS, 400)
    converters = {"markitdown": _markitdown(), "pymupdf4llm": _pymupdf4llm()}
    results = []
    with tempfile.TemporaryDirectory() as folder:
        files = {}
        pdf = Path(folder) / "doc.pdf"
        files[pdf] = write_pdf(pdf, source, pages=2 if args.quick else 20)
        files[Path(folder) / "doc.docx"] = source[:30]
        write_docx(Path(folder) / "doc.docx", source[:30])
        files[Path(folder) / "doc.html"] = source[:30]
        write_html(Path(folder) / "doc.html", source[:30])
        for path, paragraphs in files.items():
            for name, convert in converters.items():
                found = convert and measure(convert, path, paragraphs, repeats)
                if found:
                    results.append({"converter": name, "file": path.suffix[1:], **found})
    report = {"bench": "recipe_sources", "quick": args.quick, "results": results}
    print(json.dumps(report))
    for r in results:
        print(
            f"{r['converter']:12} {r['file']:5} {r['seconds']:7.3f} s  paragraphs found "
            f"{r['paragraphs_found'] * 100:5.1f} %  similarity {r['similarity']:5.1f}",
            file=sys.stderr,
        )
    return report


if __name__ == "__main__":
    main()
