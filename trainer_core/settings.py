"""Environment configuration, in one place (pydantic-settings; variables start with ``STUDIO_``)."""

from __future__ import annotations

import os
from functools import lru_cache
from pathlib import Path
from typing import Optional

from pydantic import Field, SecretStr
from pydantic_settings import BaseSettings, SettingsConfigDict


class Settings(BaseSettings):
    """Files, access control and streaming settings. ``STUDIO_DATA_DIR`` sets ``data_dir``, and so on."""

    model_config = SettingsConfigDict(env_prefix="STUDIO_", extra="ignore")

    data_dir: Path = Field(Path("studio_data"), description="Root for runs, uploads and the run history database.")
    models_dir: Path = Field(
        Path.home() / ".cache" / "finetune_studio" / "models",
        description="Cache of models materialized from bundled files (the offline default model), shared by data dirs.",
    )
    allowed_paths: str = Field("", description=f"Extra folders (separated by '{os.pathsep}' or ',') that dataset, "
                                               "checkpoint and output paths may lie in, besides the data dir.")
    username: Optional[str] = Field(None, description="With password: login required for the UI.")
    password: Optional[SecretStr] = Field(None, description="With username: login required for the UI.")
    api_token: Optional[SecretStr] = Field(None, description="Bearer token required on every /api/train/* route.")
    insecure: bool = Field(False, description="Allow a public bind or share link without credentials.")
    sse_heartbeat_s: float = Field(10.0, gt=0, description="Seconds without a new step before an SSE heartbeat.")

    @property
    def runs_dir(self) -> Path:
        """Default parent of each run's output folder."""
        return self.data_dir / "runs"

    @property
    def uploads_dir(self) -> Path:
        """Where files uploaded through the UI are kept."""
        return self.data_dir / "uploads"

    @property
    def db_path(self) -> Path:
        """The run history (SQLite)."""
        return self.data_dir / "studio.db"

    @property
    def allowed_roots(self) -> list[Path]:
        """Folders user-supplied paths must lie in: the data dir (uploads and runs inside it) plus
        ``allowed_paths``."""
        extra = [p.strip() for p in self.allowed_paths.replace(os.pathsep, ",").split(",") if p.strip()]
        return [self.data_dir, self.uploads_dir, *(Path(p) for p in extra)]

    @property
    def login_enabled(self) -> bool:
        """Both username and password are set."""
        return bool(self.username and self.password)


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    """The process-wide settings, read from the environment once."""
    return Settings()
