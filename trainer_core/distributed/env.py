"""The rank of this process in a launched group, from the variables torchrun sets (``RANK``,
``WORLD_SIZE``, ``LOCAL_RANK``; https://pytorch.org/docs/stable/elastic/run.html). A process that no
launcher started is rank 0 of 1."""

from __future__ import annotations

import os


def rank() -> int:
    """This process's global rank (0 outside a group)."""
    return int(os.environ.get("RANK", "0"))


def world_size() -> int:
    """How many processes train this run (1 outside a group)."""
    return int(os.environ.get("WORLD_SIZE", "1"))


def local_rank() -> int:
    """This process's rank on its machine: the index of its GPU among the visible ones (0 outside a group)."""
    return int(os.environ.get("LOCAL_RANK", "0"))


def node_rank() -> int:
    """This machine's number in a run across machines (torchrun's ``GROUP_RANK``; 0 otherwise)."""
    return int(os.environ.get("GROUP_RANK", "0"))


def is_main() -> bool:
    """True for the process that reports progress and writes the run folder (rank 0)."""
    return rank() == 0


def device_for_rank(device: str) -> str:
    """``cuda`` -> ``cuda:<LOCAL_RANK>`` inside a group (each process on its own GPU); unchanged otherwise."""
    if device == "cuda" and world_size() > 1:
        return f"cuda:{local_rank()}"
    return device
