"""Data file names and compression: ``rows.jsonl.zst`` is JSON lines compressed with Zstandard.

``datasets`` decompresses ``.gz`` and ``.zst`` data files itself (``zstandard`` must be installed
for ``.zst``); the stdlib passes that explain a bad file (``json_check``) and read a file's first rows
read the decompressed text through ``open_text`` here.
"""

from __future__ import annotations

import gzip
import io
from pathlib import Path
from typing import IO

# data extension -> datasets builder
BUILDERS = {".json": "json", ".jsonl": "json", ".csv": "csv", ".parquet": "parquet", ".txt": "text"}
COMPRESSIONS = (".gz", ".zst")  # gzip (stdlib), Zstandard (the zstandard package)
COMPRESSIBLE = (".json", ".jsonl", ".csv", ".txt")  # parquet compresses inside the file
DATA_SUFFIXES = (*BUILDERS, *(ext + comp for comp in COMPRESSIONS for ext in COMPRESSIBLE))
SUPPORTED = ", ".join(DATA_SUFFIXES)


def split_suffix(file: Path) -> tuple[str, str]:
    """(data extension, compression) of ``file``, lower case: ``rows.JSONL.gz`` -> (".jsonl", ".gz"),
    ``a.csv`` -> (".csv", ""), ``notes.md`` -> (".md", ""). The data extension is "" when a
    compressed name has none (``rows.gz``)."""
    suffix = file.suffix.lower()
    if suffix in COMPRESSIONS:
        return Path(file.stem).suffix.lower(), suffix
    return suffix, ""


def data_suffix(file: Path) -> str:
    """The whole data suffix of ``file`` as a user sees it (".jsonl.zst", ".csv")."""
    ext, compression = split_suffix(file)
    return ext + compression


def is_data_file(file: Path) -> bool:
    """True when ``file``'s name ends with one of DATA_SUFFIXES."""
    return data_suffix(file) in DATA_SUFFIXES


def open_binary(file: Path) -> IO[bytes]:
    """``file`` opened for reading its decompressed bytes. Raises OSError (a damaged or truncated
    compressed file raises it, or zstandard's ``ZstdError``, when read)."""
    compression = split_suffix(file)[1]
    if compression == ".gz":
        return gzip.open(file, "rb")
    if compression == ".zst":
        import zstandard

        return zstandard.ZstdDecompressor().stream_reader(file.open("rb"), closefd=True)
    return file.open("rb")


def open_text(file: Path, encoding: str = "utf-8-sig", newline: str | None = None) -> IO[str]:
    """``file`` opened as decompressed text (``encoding``; ``newline`` as for ``open``)."""
    return io.TextIOWrapper(open_binary(file), encoding=encoding, newline=newline)


def read_text(file: Path, encoding: str = "utf-8-sig") -> str:
    """The whole decompressed text of ``file``. Raises UnicodeDecodeError for text that is not
    ``encoding``, OSError (or ``zstandard.ZstdError``) for an unreadable or damaged file."""
    with open_binary(file) as handle:
        return handle.read().decode(encoding)
