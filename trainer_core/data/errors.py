"""The data layer's errors: one for a dataset that cannot be used, one for a bad row."""

from __future__ import annotations


class DatasetError(ValueError):
    """Training data that cannot be used; the message names the file (row, column) and the fix."""


class RowError(ValueError):
    """A problem inside one row; ``formats.normalize`` adds the file and the row number."""
