"""Documents to text: PDF, DOCX and HTML through markitdown (``markitdown[pdf,docx]``: pdfminer.six,
mammoth, BeautifulSoup; MIT; chosen over pymupdf4llm, AGPL, in docs/BENCHMARKS.md "Data recipes"),
Markdown and plain text read as they are. A PDF without a text layer (a scan) and a file that cannot
be read are refused by name, never turned into empty text."""

from __future__ import annotations

import logging
from collections.abc import Iterable
from functools import cache
from pathlib import Path
from typing import Any

from trainer_core.paths import confine, shown
from trainer_core.recipes.errors import (
    EMPTY_DOCUMENT,
    NO_TEXT_LAYER,
    UNSUPPORTED_DOCUMENT,
    SourceError,
)

log = logging.getLogger(__name__)
FIELD = "documents"
KINDS = {".pdf": "PDF", ".docx": "DOCX", ".html": "HTML", ".htm": "HTML", ".md": "Markdown", ".markdown": "Markdown"}
KINDS[".txt"] = "text"
CONVERTED = (".pdf", ".docx", ".html", ".htm")  # through markitdown; the others are read as text
MAX_DOCUMENT_BYTES = 200 * 1024 * 1024  # one file; larger ones are refused before conversion


@cache
def _converter(suffix: str) -> Any:
    """markitdown's converter for ``suffix``, called directly: a file named ``.pdf`` is read as a
    PDF or refused, never passed on to the plain-text fallback the guessing front door would use."""
    from markitdown import converters

    return {".pdf": converters.PdfConverter, ".docx": converters.DocxConverter}.get(suffix, converters.HtmlConverter)()


def _converted(path: Path) -> str:
    """The text markitdown finds in ``path``. Raises SourceError naming the file when it cannot."""
    from markitdown import StreamInfo

    suffix = path.suffix.lower()
    try:
        with path.open("rb") as stream:
            found = _converter(suffix).convert(stream, StreamInfo(extension=suffix, filename=path.name))
        return found.text_content or ""
    except Exception as exc:  # markitdown wraps each converter's own errors in its exceptions
        reason = str(exc).strip().splitlines()[-1:] or [exc.__class__.__name__]
        raise SourceError(
            f"{FIELD}: '{path.name}' cannot be read as {KINDS[path.suffix.lower()]} ({reason[0][:200]}); "
            "check the file opens in its own program",
            fields=(FIELD,),
        ) from None


def document_text(path: Path) -> str:
    """The text of one document (Markdown for converted files). Raises SourceError: an unknown
    suffix, a file too large, unreadable or without text (a PDF without a text layer: ``no_text_layer``)."""
    suffix = path.suffix.lower()
    if suffix not in KINDS:
        raise SourceError(
            f"{FIELD}: '{path.name}' is not a document the recipes read ({', '.join(sorted(KINDS))})",
            fields=(FIELD,),
            code=UNSUPPORTED_DOCUMENT,
        )
    if path.stat().st_size > MAX_DOCUMENT_BYTES:
        raise SourceError(
            f"{FIELD}: '{path.name}' is larger than {MAX_DOCUMENT_BYTES // 2**20} MiB; split it", fields=(FIELD,)
        )
    if suffix in CONVERTED:
        text = _converted(path)
    else:
        try:
            text = path.read_text(encoding="utf-8")
        except (UnicodeDecodeError, OSError) as exc:
            raise SourceError(
                f"{FIELD}: '{path.name}' is not UTF-8 text ({exc.__class__.__name__}); save it as UTF-8",
                fields=(FIELD,),
            ) from None
    if text.strip():
        return text
    if suffix == ".pdf":
        raise SourceError(
            f"{FIELD}: no text layer: '{path.name}' holds pictures of pages (a scan); run OCR on it first "
            "(for example ocrmypdf) and use the result",
            fields=(FIELD,),
            code=NO_TEXT_LAYER,
        )
    raise SourceError(f"{FIELD}: '{path.name}' holds no text", fields=(FIELD,), code=EMPTY_DOCUMENT)


def document_files(paths: Iterable[str], roots: Iterable[Path]) -> list[Path]:
    """The files named by ``paths`` (files, or folders: their documents, sorted), each through the
    studio's path check (``paths.confine``). Raises SourceError for a missing path or an empty folder."""
    roots = list(roots)
    files: list[Path] = []
    for name in paths:
        path = confine(name, roots, FIELD)
        if path.is_dir():
            found = sorted(p for p in path.rglob("*") if p.is_file() and p.suffix.lower() in KINDS)
            if not found:
                raise SourceError(f"{FIELD}: the folder '{shown(name)}' holds no documents", fields=(FIELD,))
            files.extend(confine(p, roots, FIELD) for p in found)
        elif path.is_file():
            files.append(path)
        else:
            raise SourceError(f"{FIELD}: '{shown(name)}' does not exist", fields=(FIELD,), code="missing_files")
    return list(dict.fromkeys(files))
