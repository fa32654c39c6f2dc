"""The token cache on, in a data dir of the test's own."""

from __future__ import annotations

import pytest

from trainer_core.settings import get_settings


@pytest.fixture
def cache_dir(tmp_path, monkeypatch):
    """A data dir in ``tmp_path`` with a 64 MB token cache; its ``token_cache`` folder."""
    monkeypatch.setenv("STUDIO_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("STUDIO_TOKEN_CACHE_MB", "64")
    get_settings.cache_clear()
    yield tmp_path / "data" / "token_cache"
    get_settings.cache_clear()
