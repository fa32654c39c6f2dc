"""Reading, normalising, inspecting and tokenizing datasets."""

from __future__ import annotations

import threading

_STACK_LOCK = threading.Lock()


def import_data_stack() -> None:
    """Import ``datasets`` and transformers' tokenizer classes, one thread at a time. The app
    imports them lazily (a page load should not wait for them), and two request threads importing
    torch at once can see it half initialised ("partially initialized module 'torch'"). The
    app's console is for its log lines: ``datasets``' progress bars (reading, tokenizing for the
    preview and the pre-flight check) are turned off."""
    with _STACK_LOCK:
        import datasets
        from transformers import AutoTokenizer  # noqa: F401

        datasets.disable_progress_bars()
