"""The data layer's errors: one for a dataset that cannot be used, one for a bad row."""

from __future__ import annotations

from trainer_core.refusals import Refusal


class DatasetError(Refusal):
    """Training data that cannot be used; the message names the file (row, column) and the fix,
    ``fields`` the request fields it names (often none: the file itself is the problem)."""

    code = "dataset_unusable"


class RowError(ValueError):
    """A problem inside one row; ``formats.normalize`` adds the file and the row number."""
