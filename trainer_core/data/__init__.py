"""Reading, normalising, inspecting and tokenizing datasets."""

from __future__ import annotations

import threading

_STACK_LOCK = threading.Lock()


def import_data_stack() -> None:
    """Import ``datasets`` and transformers' tokenizer classes, one thread at a time. The app
    imports them lazily (a page load should not wait for them), and two request threads importing
    torch at once can see it half initialised ("partially initialized module 'torch'")."""
    with _STACK_LOCK:
        import datasets  # noqa: F401
        from transformers import AutoTokenizer  # noqa: F401
