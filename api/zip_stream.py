"""One download for a task's files: a ZIP archive streamed as it is written (stdlib ``zipfile``
over an unseekable sink, entries stored uncompressed: GGUF and safetensors do not compress, and
nothing is written to disk). ZIP64 is forced per entry, so files over 4 GiB work (PKWARE APPNOTE
6.3.x, section 4.5.3; read by ``unzip`` 6, 7-Zip, Windows Explorer and macOS Archive Utility)."""

from __future__ import annotations

import io
import logging
import os
import stat
import time
import zipfile
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

CHUNK_BYTES = 1 << 20


class _Sink(io.RawIOBase):
    """A write-only, unseekable stream that keeps what was written until ``drain``."""

    def __init__(self) -> None:
        super().__init__()
        self._chunks: list[bytes] = []

    def writable(self) -> bool:
        return True

    def write(self, data: bytes) -> int:  # type: ignore[override]
        self._chunks.append(bytes(data))
        return len(data)

    def drain(self) -> bytes:
        out, self._chunks = b"".join(self._chunks), []
        return out


def _open_plain(path: Path) -> Any:
    """``path`` opened for reading without following a link at its last component (a listed file
    swapped for a link after the route's check is refused), and only if it is a regular file.
    Raises OSError."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise OSError(f"{path.name} is not a regular file")
    return os.fdopen(fd, "rb")


def stream_zip(files: Iterable[tuple[str, Path]]) -> Iterator[bytes]:
    """The bytes of a ZIP archive holding each (name in the archive, file) of ``files``, about
    CHUNK_BYTES at a time. A file that cannot be read when its turn comes (removed, or swapped for
    a link since it was checked) ends the archive there, logged: the response has begun, so the
    client gets a truncated archive, which unzip reports as damaged."""
    sink = _Sink()
    try:
        with zipfile.ZipFile(sink, "w", zipfile.ZIP_STORED, allowZip64=True) as archive:
            for name, path in files:
                with _open_plain(path) as fh:
                    info = zipfile.ZipInfo(name, date_time=time.localtime(os.fstat(fh.fileno()).st_mtime)[:6])
                    with archive.open(info, "w", force_zip64=True) as entry:
                        for block in iter(lambda: fh.read(CHUNK_BYTES), b""):
                            entry.write(block)
                            yield sink.drain()
                yield sink.drain()
    except OSError as exc:
        log.warning("zip download cut short: %s", exc)
        return
    yield sink.drain()
