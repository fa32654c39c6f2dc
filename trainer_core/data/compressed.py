"""Data file names and compression: ``rows.jsonl.zst`` is JSON lines compressed with Zstandard.

``datasets`` decompresses ``.gz`` and ``.zst`` data files itself (``zstandard`` must be installed
for ``.zst``); the stdlib passes that explain a bad file (``json_check``) and read a file's first rows
read the decompressed text through ``open_text`` here.

Decompression streams and is capped: reading more than ``MAX_DECOMPRESSED_BYTES`` decompressed bytes
of one file (2 GiB; the environment variable ``STUDIO_MAX_DATA_BYTES``, in bytes, overrides it at
import) raises DatasetError, so a small "zip bomb" (a 600 KB .json.gz that expands to 600 MB) is
refused after reading at most the cap instead of filling memory. ``check_decompressed`` runs that
counting pass alone, before ``datasets`` decompresses a file itself.
"""

from __future__ import annotations

import gzip
import io
import os
from pathlib import Path
from typing import IO, Optional

from trainer_core.data.errors import DatasetError

# data extension -> datasets builder
BUILDERS = {".json": "json", ".jsonl": "json", ".csv": "csv", ".parquet": "parquet", ".txt": "text"}
COMPRESSIONS = (".gz", ".zst")  # gzip (stdlib), Zstandard (the zstandard package)
COMPRESSIBLE = (".json", ".jsonl", ".csv", ".txt")  # parquet compresses inside the file
DATA_SUFFIXES = (*BUILDERS, *(ext + comp for comp in COMPRESSIONS for ext in COMPRESSIBLE))
SUPPORTED = ", ".join(DATA_SUFFIXES)
LIMIT_ENV = "STUDIO_MAX_DATA_BYTES"
ZST_FEED = 1024  # compressed bytes fed to Zstandard per call: one call then yields at most ~32 MB


def _limit_from_env(default: int = 2 * 1024**3) -> int:
    """The decompressed-size cap in bytes: ``STUDIO_MAX_DATA_BYTES`` when set (a positive whole
    number of bytes), else ``default`` (2 GiB). Raises ValueError naming the variable otherwise."""
    raw = os.environ.get(LIMIT_ENV, "").strip()
    if not raw:
        return default
    try:
        value = int(raw)
    except ValueError:
        value = 0
    if value <= 0:
        raise ValueError(
            f"{LIMIT_ENV}={raw!r} is not a positive number of bytes: set it to e.g. 2147483648 (2 GiB) or unset it"
        )
    return value


MAX_DECOMPRESSED_BYTES = _limit_from_env()  # bytes one compressed data file may decompress to


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


def size_text(size: int) -> str:
    """``size`` bytes as a reader says it: "2 GB" (GiB), "1.5 MB", "64 KB", "100 bytes"."""
    for unit, scale in (("GB", 1024**3), ("MB", 1024**2), ("KB", 1024)):
        if size >= scale:
            return f"{size / scale:.3g} {unit}"
    return f"{size} bytes"


class _Capped(io.RawIOBase):
    """The decompressed bytes of ``file`` (``.gz`` or ``.zst``), streamed; DatasetError once more
    than ``limit`` bytes came out; EOFError when Zstandard data ends inside a frame (a truncated
    file: zstandard's own stream reader returns no error then, only fewer bytes)."""

    def __init__(self, file: Path, compression: str, limit: int) -> None:
        super().__init__()
        self.file, self.limit, self.count = file, limit, 0
        self._raw = file.open("rb")
        self._gzip: Optional[gzip.GzipFile] = (
            gzip.GzipFile(fileobj=self._raw, mode="rb") if compression == ".gz" else None
        )
        self._zst = None
        self._pending = bytearray()  # decompressed, not yet returned
        self._input_done = False

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:  # noqa: ANN001 - a writable bytes-like object
        view = memoryview(buffer).cast("B")
        data = self._gzip.read(len(view)) if self._gzip is not None else self._zst_read(len(view))
        self.count += len(data)
        if self.count > self.limit:
            raise DatasetError(
                f"{self.file.name}: decompresses to more than {size_text(self.limit)}: split the data into smaller "
                f"files, or raise the limit with the environment variable {LIMIT_ENV} (bytes) if it is meant to be "
                "this large"
            )
        view[: len(data)] = data
        return len(data)

    def _zst_read(self, size: int) -> bytes:
        """Up to ``size`` decompressed bytes (b"" at the end of the data); EOFError when truncated."""
        import zstandard

        while not self._pending and not self._input_done:
            chunk = self._raw.read(ZST_FEED)
            if not chunk:
                self._input_done = True
                if self._zst is not None and not self._zst.eof:
                    raise EOFError("the Zstandard data ends early: the file is truncated")
                break
            while chunk:
                if self._zst is None or self._zst.eof:  # a new frame (files may hold several)
                    self._zst = zstandard.ZstdDecompressor().decompressobj()
                self._pending += self._zst.decompress(chunk)
                chunk = self._zst.unused_data if self._zst.eof else b""
        data = bytes(self._pending[:size])
        del self._pending[:size]  # cheap at the front of a bytearray
        return data

    def close(self) -> None:
        try:
            if self._gzip is not None:
                self._gzip.close()
            self._raw.close()
        finally:
            super().close()


def open_binary(file: Path, limit: Optional[int] = None) -> IO[bytes]:
    """``file`` opened for reading its decompressed bytes, streamed. For ``.gz`` / ``.zst`` reading
    raises DatasetError once more than ``limit`` bytes (default ``MAX_DECOMPRESSED_BYTES``) came
    out, EOFError for truncated data ("the Zstandard data ends early: the file is truncated", or
    gzip's words), ``gzip.BadGzipFile`` / ``zstandard.ZstdError`` for damaged data. Opening raises
    OSError for a file that cannot be opened."""
    compression = split_suffix(file)[1]
    if compression in COMPRESSIONS:
        if compression == ".zst":
            import zstandard  # noqa: F401 - a clear ImportError now rather than at the first read
        return io.BufferedReader(
            _Capped(file, compression, MAX_DECOMPRESSED_BYTES if limit is None else limit), buffer_size=65536
        )
    return file.open("rb")


def open_text(file: Path, encoding: str = "utf-8-sig", newline: str | None = None) -> IO[str]:
    """``file`` opened as decompressed text (``encoding``; ``newline`` as for ``open``); reading
    raises as ``open_binary``'s reads do."""
    return io.TextIOWrapper(open_binary(file), encoding=encoding, newline=newline)


def read_text(file: Path, encoding: str = "utf-8-sig", limit: Optional[int] = None) -> str:
    """The decompressed text of ``file``: all of it, or with ``limit`` only its first ``limit``
    bytes (a character cut in two by the limit is dropped).
    Raises UnicodeDecodeError for text that is not ``encoding``, DatasetError for a compressed file
    that decompresses to more than ``MAX_DECOMPRESSED_BYTES``, EOFError for a truncated one, OSError
    (or ``zstandard.ZstdError``) for an unreadable or damaged file."""
    with open_binary(file) as handle:
        data = handle.read() if limit is None else handle.read(limit)
    try:
        return data.decode(encoding)
    except UnicodeDecodeError as exc:
        if limit is None or len(data) < limit or exc.start < len(data) - 3:
            raise
        return data[: exc.start].decode(encoding)  # a character cut by the limit


def check_decompressed(file: Path) -> None:
    """Decompress ``file`` (``.gz`` / ``.zst``; nothing for others) without keeping it, to refuse
    it before ``datasets`` decompresses it whole. Raises as ``open_binary``'s reads do."""
    if split_suffix(file)[1] not in COMPRESSIONS:
        return
    with open_binary(file) as handle:
        while handle.read(1 << 20):
            pass
