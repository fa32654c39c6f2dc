"""Images named by training rows: checked, opened with a pixel limit and resized.

A reference is a path (relative to the data file's folder, as LLaMA-Factory's ``images`` lists
are, or absolute), a ``data:image/...;base64,`` URL (OpenAI content parts), or the bytes of a Hub
``Image`` column (``{"bytes": ..., "path": ...}``). A path passes the one path check
(``paths.confine``): it must lie in the data file's folder or in the allowed folders. Remote URLs
are refused (nothing is fetched while training).

Every image is opened through ``opened``, which reads the header first: an image of more than
``MAX_PIXELS`` pixels (a decompression bomb: a few KB of PNG can declare 100,000 x 100,000 pixels)
is refused before any pixel is decoded. Reading a row's images (``check_image``) decodes each one, so
a truncated file is refused by file and row at Check and Start.
"""

from __future__ import annotations

import base64
import binascii
import io
import os
import warnings
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Optional

from trainer_core.data.errors import RowError
from trainer_core.paths import PathNotAllowed, confine

MAX_PIXELS = int(os.environ.get("STUDIO_MAX_IMAGE_PIXELS", 64_000_000))  # 8,000 x 8,000
DATA_URL = "data:"
MARKER = "<image>"  # where an image goes in a canonical row's (or a chat turn's) text


def base_folder(path: str) -> Path:
    """The folder a data file's relative image paths are read from: the file's own folder, or the
    folder itself for a folder of data files (LLaMA-Factory's ``dataset_dir``)."""
    given = Path(path).expanduser()
    return given if given.is_dir() else given.parent


def resolve_reference(reference: Any, base: Optional[Path], roots: Iterable[Path], medium: str = "image") -> str:
    """The canonical form of one media reference of a row (``medium``: "image", "audio clip"; the
    word the refusals use): an absolute, confined path, a ``data:`` URL as it is, or (the bytes of a
    Hub ``Image`` / ``Audio`` column, not decoded) a ``data:`` URL made from the bytes. Raises
    RowError (no file or row: the caller adds them) for a remote URL, a path outside ``base`` and
    ``roots``, a missing file, or a value that is no such reference."""
    kind = "image" if medium == "image" else "audio"
    if isinstance(reference, dict):  # a Hub Image / Audio feature, not decoded
        data = reference.get("bytes")
        if data and not isinstance(data, (bytes, bytearray)):
            raise RowError(
                f"an {medium}'s \"bytes\" must be the file's bytes (a Hub {kind.title()} column), not "
                f"{type(data).__name__}: in a JSON file name the {medium} by its path or give a data: URL"
            )
        if data:
            return DATA_URL + f"{kind}/*;base64," + base64.b64encode(data).decode("ascii")
        reference = reference.get("path")
    if not isinstance(reference, str) or not reference.strip():
        raise RowError(f"an {medium} reference must be a file path or a data: URL, not {type(reference).__name__}")
    text = reference.strip()
    if text.startswith(DATA_URL):
        return text
    if text.startswith(("http://", "https://", "ftp://")):
        raise RowError(f"{medium} {text[:80]} is a remote URL: download it next to the data file and name its path")
    text = text.removeprefix("file://")
    path = Path(text).expanduser()
    if not path.is_absolute():
        if base is None:
            raise RowError(f"{medium} {text[:80]} is a relative path, and this data has no folder to read it from")
        path = base / path
    try:
        found = confine(path, [*([base] if base else []), *roots], medium)
    except PathNotAllowed as exc:
        raise RowError(str(exc)) from None
    if not found.is_file():
        raise RowError(f"{medium} {text[:120]} was not found (looked for {found})")
    return str(found)


@contextmanager
def opened(reference: str) -> Iterator[Any]:
    """The one way an image is opened: the ``PIL.Image`` of a canonical reference (``resolve_reference``)
    with only its header read, refused over ``MAX_PIXELS`` pixels before any pixel is decoded.
    PIL's own bomb check is set to the same limit (``Image.MAX_IMAGE_PIXELS``): it warns above it
    (silenced: refused here) and raises ``DecompressionBombError`` above twice it, inside
    ``Image.open``, before the size can be read; that is the same refusal. Raises RowError (naming
    the image, not the row: the caller adds file and row) for an oversized, unreadable or damaged
    image or a malformed data URL; what the body raises while decoding is turned into RowError too."""
    from PIL import Image, UnidentifiedImageError

    Image.MAX_IMAGE_PIXELS = MAX_PIXELS  # one limit for the studio and PIL (PIL: 89,478,485 by default)
    try:
        source: Any = io.BytesIO(data_url_bytes(reference)) if reference.startswith(DATA_URL) else reference
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", Image.DecompressionBombWarning)
            image = Image.open(source)
        with image:
            width, height = image.size
            if width * height > MAX_PIXELS:
                raise RowError(_too_large(reference, f"{width} x {height} pixels"))
            yield image
    except Image.DecompressionBombError:
        raise RowError(_too_large(reference, f"over {2 * MAX_PIXELS:,} pixels")) from None
    except (OSError, UnidentifiedImageError, SyntaxError, ValueError, EOFError) as exc:
        if isinstance(exc, RowError):
            raise
        raise RowError(f"image {_name(reference)} cannot be read as an image ({type(exc).__name__}: {exc})") from None


def _too_large(reference: str, size: str) -> str:
    return (
        f"image {_name(reference)} is {size}, more than the limit of {MAX_PIXELS:,}: resize it "
        "(or raise STUDIO_MAX_IMAGE_PIXELS)"
    )


def open_image(reference: str, max_side: Optional[int] = None) -> Any:
    """The RGB ``PIL.Image`` of a canonical reference (``resolve_reference``), its longest side cut to
    ``max_side`` pixels (aspect kept; None: as it is). Raises RowError as ``opened`` does (over
    ``MAX_PIXELS`` pixels, checked from the header before decoding; unreadable, damaged or truncated)."""
    from PIL import Image

    with opened(reference) as image:
        image.load()
        rgb = image.convert("RGB")
    if max_side and max(rgb.size) > max_side:
        rgb.thumbnail((max_side, max_side), Image.Resampling.BICUBIC)
    return rgb


THUMBNAIL_SIDE = 96  # pixels, the preview's thumbnails


def thumbnail(reference: str, side: int = THUMBNAIL_SIDE) -> str:
    """A small JPEG ``data:`` URL of a canonical reference (longest side ``side`` pixels; about
    2-4 KB), for the dataset preview. Raises RowError as ``open_image`` does."""
    picture = open_image(reference, side)
    buffer = io.BytesIO()
    picture.save(buffer, format="JPEG", quality=75)
    return "data:image/jpeg;base64," + base64.b64encode(buffer.getvalue()).decode("ascii")


def check_image(reference: str) -> tuple[int, int]:
    """(width, height) of a canonical reference after decoding it whole, so that a damaged or
    truncated file is refused when the data is read, not in the middle of training. A JPEG is
    decoded at 1/8 scale (``Image.draft``: every byte of it is still read; 40 instead of 80 ms for a
    noisy 2000 x 1500 photo here).
    Raises RowError as ``opened`` does."""
    with opened(reference) as image:
        size = image.size
        image.draft(None, (max(1, size[0] // 8), max(1, size[1] // 8)))
        image.load()
    return size


def data_url_bytes(url: str, medium: str = "image", example: str = "data:image/png;base64,...") -> bytes:
    """The bytes of a ``data:[type];base64,...`` URL (of an image or audio clip: ``medium`` and
    ``example`` word the refusal). Raises RowError when it is not base64."""
    head, _, payload = url.partition(",")
    if not head.endswith(";base64") or not payload:
        raise RowError(f"a data: URL {medium} must be base64 ({example})")
    try:
        return base64.b64decode(payload, validate=True)
    except (binascii.Error, ValueError):
        raise RowError(f"a data: URL {medium} holds text that is not valid base64") from None


def _name(reference: str) -> str:
    return "(data: URL)" if reference.startswith(DATA_URL) else Path(reference).name
