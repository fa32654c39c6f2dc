"""A full disk refused in words on the page, as the HTTP API refuses it (507).

Any event handler whose write finds the disk full (a run's name and note, a share link, a queued
job, an export's task record: SQLite's "database or disk is full", or ENOSPC from a file) ends with
the notice ``process.disk_full.storage_refusal`` words, never Gradio's bare "Error" and a
traceback. ``refuse_full_disk`` wraps one ``Blocks``' ``call_function`` (gradio 6.x), through which
every handler runs, generators' later steps included.
"""

from __future__ import annotations

import sqlite3
import types
from pathlib import Path
from typing import Any

import gradio as gr

from trainer_core.process.disk_full import storage_refusal
from ui.refused import Refused


def refuse_full_disk(blocks: gr.Blocks, data_dir: Path) -> gr.Blocks:
    """``blocks`` (changed in place; returned for chaining) with a full disk met by any of its
    handlers raised as a ``Refused`` notice; ``data_dir`` (the run history's folder) is named where
    the error names no file. Any other error is left as it was."""
    original = blocks.call_function

    async def call_function(self: gr.Blocks, *args: Any, **kwargs: Any) -> Any:
        try:
            return await original(*args, **kwargs)
        except (sqlite3.OperationalError, OSError) as exc:
            message = storage_refusal(exc, data_dir)
            if message is None:
                raise
            raise Refused(message) from None

    blocks.call_function = types.MethodType(call_function, blocks)
    return blocks
