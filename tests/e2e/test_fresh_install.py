"""A fresh install: before any run has built the default model from the bundled
GGUF, the check and Start read its tokenizer from the GGUF and give their real answers."""

from __future__ import annotations

import json

import pytest

from trainer_core.settings import Settings, get_settings


@pytest.fixture
def fresh(tmp_path, datasets_dir, monkeypatch):
    """Settings with an empty models folder (nothing materialized) and the datasets allowed."""
    settings = Settings(data_dir=tmp_path / "data", models_dir=tmp_path / "models", allowed_paths=str(datasets_dir))
    for name, value in (("DATA_DIR", settings.data_dir), ("MODELS_DIR", settings.models_dir)):
        monkeypatch.setenv(f"STUDIO_{name}", str(value))
    monkeypatch.setenv("STUDIO_ALLOWED_PATHS", settings.allowed_paths)
    get_settings.cache_clear()
    yield settings
    get_settings.cache_clear()


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_check_and_start_count_tokens_before_the_default_model_is_built(fresh, datasets_dir, capsys):
    from fastapi.testclient import TestClient

    from server import build_app
    from trainer_core.cli.main import main

    identity = str(datasets_dir / "identity.json")
    # max_seq_length 16: every answer starts after the cut, so nothing would be trained
    assert main(["check", "--dataset", identity, "--max-seq-length", "16", "--json"]) == 1
    report = json.loads(capsys.readouterr().out)
    assert report["tokenizer_found"] is True
    assert report["rows_kept"] == 0 and report["rows_truncated"] == 91 and report["tokens_cut"] > 8000
    assert report["errors"] and report["architecture"] == "LlamaForCausalLM"
    assert not (fresh.models_dir / "SmolLM2-135M-Instruct").exists()  # the weights were not built
    assert sorted(p.name for p in (fresh.models_dir / "SmolLM2-135M-Instruct-tokenizer").iterdir()) == [
        "chat_template.jinja",
        "config.json",
        "tokenizer.json",
        "tokenizer_config.json",
    ]

    with TestClient(build_app(fresh)) as client:
        answer = client.post("/api/train/start", json={"local_datasets": [identity], "max_seq_length": 16})
    assert answer.status_code == 400, answer.text
    assert "training would learn nothing" in answer.json()["detail"]
    assert "raise max_seq_length (the shortest such row has 47 tokens)" in answer.json()["detail"]
