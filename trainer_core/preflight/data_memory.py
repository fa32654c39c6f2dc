"""Where training reads its tokens from when they would not fit in memory: the check's word on it.

The training split's tokens (``encode_rows``' Arrow columns) are measured on the rows the check
tokenized (the sample's, scaled to the file's rows, for a sampled check) and set against the
memory there is for them: ``settings.data_memory_mb``, or (0) what the system has available now
(psutil). Larger data is not held in memory: training reads it from the token cache's Arrow files,
memory mapped (``data.token_cache``: the pages in use are read from disk as the rows are), and the
check says so; with the cache off (``token_cache_mb`` 0) the tokens would be held in memory, and
the check says how to avoid that.
"""

from __future__ import annotations

from typing import Any, Optional

from trainer_core.preflight.report import Issue
from trainer_core.settings import Settings

CODE = "data_over_memory"
GIB = 2**30


def memory_for_data(settings: Settings) -> int:
    """Bytes of memory the tokenized data may take: ``data_memory_mb``, or the available memory now."""
    if settings.data_memory_mb:
        return settings.data_memory_mb * 2**20
    import psutil

    return int(psutil.virtual_memory().available)


def tokenized_bytes(encoded: Optional[Any], rows: int) -> int:
    """Bytes of ``encoded`` (a ``datasets.Dataset`` of tokenized rows) scaled to ``rows`` rows; 0 without it."""
    if encoded is None or len(encoded) == 0:
        return 0
    return round(encoded.data.nbytes * rows / len(encoded))


def _size(count: int) -> str:
    return f"{count / GIB:.1f} GiB" if count >= GIB else f"{count / 2**20:.1f} MiB"


def data_over_memory(settings: Settings, data_bytes: int) -> Optional[Issue]:
    """Warning when ``data_bytes`` of tokens exceed the memory for them (``memory_for_data``): the
    run trains from the memory-mapped token cache, or, with the cache off, would hold them all."""
    room = memory_for_data(settings)
    if data_bytes <= room:
        return None
    size = f"the tokenized training data (about {_size(data_bytes)}) is more than the {_size(room)} of "
    size += "memory available for it" + (" (data_memory_mb)" if settings.data_memory_mb else "")
    if settings.token_cache_mb > 0:
        return Issue(
            level="warning",
            code=CODE,
            fields=["local_datasets"],
            message=f"trains from the memory-mapped token cache: {size}, so training reads the rows' tokens from "
            "the cache's Arrow files on disk as it needs them instead of holding them in memory (a first Start "
            "writes them there); steps may wait on the disk",
        )
    return Issue(
        level="warning",
        code=CODE,
        fields=["local_datasets", "dataset_slice_start", "dataset_slice_end"],
        message=f"{size}, and the token cache is off (token_cache_mb 0), so training would hold it all in "
        "memory: turn the cache on (STUDIO_TOKEN_CACHE_MB) to train from its memory-mapped files, or train on "
        "a slice of the rows (dataset_slice_start / dataset_slice_end)",
    )


__all__ = ["CODE", "data_over_memory", "memory_for_data", "tokenized_bytes"]
