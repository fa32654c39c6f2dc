"""How the check report says its figures (``preflight.report``)."""

from __future__ import annotations

from trainer_core.preflight.report import PreflightReport


def test_epochs_are_said_rounded():
    said = [PreflightReport.model_construct(epochs=e).epochs_words() for e in (1.30435, 3.0, 0.043478, 2.96)]
    assert said == ["1.3", "3", "0.043", "3"]
