"""Confinement of user-supplied paths (datasets, checkpoints, output folders) to allowed roots."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Iterable


class PathNotAllowed(ValueError):
    """A path resolves (after ``..`` and symlinks) outside every allowed root."""


def confine(path: str, roots: Iterable[Path], field: str) -> Path:
    """The fully resolved ``path`` if it lies inside one of ``roots`` (also resolved); raises
    PathNotAllowed naming ``field`` otherwise. Symlinks are followed, so a link that points out of
    the roots is refused like ``..`` is."""
    resolved = Path(os.path.realpath(Path(path).expanduser()))
    allowed = [Path(os.path.realpath(Path(r).expanduser())) for r in roots]
    if any(resolved == root or root in resolved.parents for root in allowed):
        return resolved
    names = ", ".join(str(r) for r in allowed) or "(none)"
    raise PathNotAllowed(
        f"{field}: {path} is outside the allowed folders ({names}); upload the file, or add its folder "
        "to STUDIO_ALLOWED_PATHS"
    )
