"""Shared fixtures: the real SmolLM2 tokenizer/model (materialized once) and the shared datasets."""

from __future__ import annotations

from pathlib import Path

import pytest

from trainer_core.settings import get_settings

REPO = Path(__file__).resolve().parent.parent
DATASETS = REPO.parent / "shared" / "datasets"


@pytest.fixture(scope="session")
def model_dir() -> Path:
    """Folder of the real SmolLM2-135M-Instruct model (built from the bundled GGUF on first use)."""
    from trainer_core.models.loading import materialize_default_model

    return materialize_default_model(get_settings().models_dir)


@pytest.fixture(scope="session")
def tokenizer(model_dir: Path):
    """The real SmolLM2 tokenizer (ChatML template, eos/pad = <|im_end|>)."""
    from trainer_core.models.loading import load_tokenizer

    return load_tokenizer(model_dir)


@pytest.fixture(scope="session")
def datasets_dir() -> Path:
    """``../shared/datasets`` beside the repo."""
    assert DATASETS.is_dir(), f"{DATASETS} is missing: CI lays ../shared beside the clone"
    return DATASETS
