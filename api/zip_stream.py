"""One download for a task's files: a ZIP archive streamed as it is written (stdlib ``zipfile``
over an unseekable sink, entries stored uncompressed: GGUF and safetensors do not compress, and
nothing is written to disk). ZIP64 is forced per entry, so files over 4 GiB work (PKWARE APPNOTE
6.3.x, section 4.5.3; read by ``unzip`` 6, 7-Zip, Windows Explorer and macOS Archive Utility)."""

from __future__ import annotations

import io
import zipfile
from collections.abc import Iterable, Iterator
from pathlib import Path

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


def stream_zip(paths: Iterable[Path]) -> Iterator[bytes]:
    """The bytes of a ZIP archive holding each file of ``paths`` under its own name, about
    CHUNK_BYTES at a time. Raises OSError when a file cannot be read (mid-stream: the archive is
    then cut short, which unzip reports as damaged)."""
    sink = _Sink()
    with zipfile.ZipFile(sink, "w", zipfile.ZIP_STORED, allowZip64=True) as archive:
        for path in paths:
            info = zipfile.ZipInfo.from_file(path, arcname=path.name)
            with archive.open(info, "w", force_zip64=True) as entry, path.open("rb") as fh:
                for block in iter(lambda: fh.read(CHUNK_BYTES), b""):
                    entry.write(block)
                    yield sink.drain()
            yield sink.drain()
    yield sink.drain()
