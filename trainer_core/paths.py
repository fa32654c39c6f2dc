"""Confinement of user-supplied paths (datasets, uploads, models, checkpoints, output folders) to
allowed roots: the one path check every door uses."""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

from trainer_core.refusals import Refusal

MAX_SHOWN_CHARS = 120  # a path echoed in an error is cut to this many characters
NAME_MAX_BYTES = 255  # longest file or folder name on Linux file systems
PATH_MAX_BYTES = 4095  # longest path the kernel takes (PATH_MAX 4096, with its NUL)


class PathNotAllowed(Refusal):
    """A path resolves (after ``..`` and symlinks) outside every allowed root, or cannot be a path
    at all (empty, a NUL byte, too long for the file system)."""

    code = "path_not_allowed"


def _named(field: str) -> tuple[str, ...]:
    """``(field,)`` when ``field`` is a request field's name; none for a description such as
    ``"allowed folder"``."""
    return (field,) if field.isidentifier() else ()


def shown(path: str) -> str:
    """``path`` cut to ``MAX_SHOWN_CHARS`` characters for an error message."""
    path = str(path)
    return path if len(path) <= MAX_SHOWN_CHARS else path[: MAX_SHOWN_CHARS - 1] + "…"


def resolve(path: str | os.PathLike, field: str) -> Path:
    """``path`` with ``~``, ``..`` and symlinks resolved. Raises PathNotAllowed naming ``field`` for
    values that cannot be paths (empty, NUL bytes, lone surrogates, a name or a resolved path longer
    than Linux allows: 255 bytes a name, 4,096 a path)."""
    text = os.fspath(path)
    if not text.strip() or "\x00" in text:
        raise PathNotAllowed(f"{field}: '{shown(text)}' is not a valid path", fields=_named(field))
    try:
        resolved = Path(os.path.realpath(Path(text).expanduser()))
    except (OSError, ValueError, RuntimeError) as exc:  # symlink loops, odd encodings
        raise PathNotAllowed(
            f"{field}: '{shown(text)}' is not a usable path ({exc.__class__.__name__})", fields=_named(field)
        ) from None
    if any(len(part.encode("utf-8", "surrogatepass")) > NAME_MAX_BYTES for part in resolved.parts):
        raise PathNotAllowed(
            f"{field}: '{shown(text)}' has a file or folder name longer than {NAME_MAX_BYTES} bytes",
            fields=_named(field),
        )
    if len(str(resolved).encode("utf-8", "surrogatepass")) > PATH_MAX_BYTES:
        raise PathNotAllowed(
            f"{field}: '{shown(text)}' is longer than {PATH_MAX_BYTES + 1} bytes once resolved", fields=_named(field)
        )
    try:
        str(resolved).encode("utf-8")
    except UnicodeEncodeError:
        raise PathNotAllowed(
            f"{field}: the path holds characters that are not valid text (lone surrogates)", fields=_named(field)
        ) from None
    return resolved


def is_within(path: Path, root: Path) -> bool:
    """True when resolved ``path`` is ``root`` or lies below it (both already resolved)."""
    return path == root or root in path.parents


def confine(path: str | os.PathLike, roots: Iterable[Path], field: str) -> Path:
    """The fully resolved ``path`` if it lies inside one of ``roots`` (also resolved); raises
    PathNotAllowed naming ``field`` otherwise. Symlinks are followed, so a link that points out of
    the roots is refused like ``..`` is. The message never says whether the path exists."""
    resolved = resolve(path, field)
    allowed = [resolve(r, "allowed folder") for r in roots]
    if any(is_within(resolved, root) for root in allowed):
        return resolved
    names = ", ".join(str(r) for r in allowed) or "(none)"
    raise PathNotAllowed(
        f"{field}: {shown(os.fspath(path))} is outside the allowed folders ({names}); put it in one of them (the form's upload fields do that for "
        "data files), or add "
        "its folder to STUDIO_ALLOWED_PATHS",
        fields=_named(field),
    )
