"""The system message a training set shares: what its exports' Modelfile ``SYSTEM`` says."""

from __future__ import annotations

from typing import Optional

import datasets


def shared_system_message(rows: datasets.Dataset) -> Optional[str]:
    """The system message every conversation of ``rows`` (canonical, column ``messages``) opens
    with, when they all open with the same one; None when a row has none, two rows differ, or the
    rows are raw text. What the run was trained to answer under: its exports' Modelfile ``SYSTEM``."""
    if "messages" not in rows.column_names or len(rows) == 0:
        return None
    found: Optional[str] = None
    for batch in rows.select_columns(["messages"]).iter(batch_size=1000):
        for messages in batch["messages"]:
            first = messages[0] if messages else {}
            content = first.get("content") if first.get("role") == "system" else None
            if not isinstance(content, str) or (found is not None and content != found):
                return None
            found = content
    return found


__all__ = ["shared_system_message"]
