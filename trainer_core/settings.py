"""Environment configuration, in one place (pydantic-settings; variables start with ``STUDIO_``)."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict


class Settings(BaseSettings):
    """Where the app keeps its files. ``STUDIO_DATA_DIR`` overrides ``data_dir``."""

    model_config = SettingsConfigDict(env_prefix="STUDIO_", extra="ignore")

    data_dir: Path = Field(Path("studio_data"), description="Root for runs and uploads.")
    models_dir: Path = Field(
        Path.home() / ".cache" / "finetune_studio" / "models",
        description="Cache of models materialized from bundled files (the offline default model), shared by data dirs.",
    )

    @property
    def runs_dir(self) -> Path:
        """Default parent of each run's output folder."""
        return self.data_dir / "runs"

    @property
    def uploads_dir(self) -> Path:
        """Where files uploaded through the UI are kept."""
        return self.data_dir / "uploads"


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    """The process-wide settings, read from the environment once."""
    return Settings()
