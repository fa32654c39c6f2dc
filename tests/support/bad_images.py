"""Image files as an attacker or a broken copy brings them, made cheaply in a test: a PNG that
declares a huge canvas (a decompression bomb) and a JPEG cut short."""

from __future__ import annotations

import struct
import zlib
from pathlib import Path


def bomb_png(width: int = 30_000, height: int = 30_000) -> bytes:
    """A valid 1-bit black PNG of ``width`` x ``height`` pixels: 30,000 x 30,000 (900 M pixels, what
    PIL would decode to 900 MB) is ~110 KB and takes ~0.4 s to build."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    row = b"\x00" * (1 + (width + 7) // 8)  # filter byte + the row's bits
    packer = zlib.compressobj(9)
    pixels = b"".join(packer.compress(row) for _ in range(height)) + packer.flush()
    header = struct.pack(">IIBBBBB", width, height, 1, 0, 0, 0, 0)  # 1 bit, greyscale
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", pixels) + chunk(b"IEND", b"")


def truncated_copy(source: Path, target: Path, keep: float = 0.5) -> Path:
    """``target``: the first ``keep`` share of ``source``'s bytes (a download cut short)."""
    data = source.read_bytes()
    target.write_bytes(data[: int(len(data) * keep)])
    return target
