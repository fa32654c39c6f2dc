"""Models that ship their own code: refused unless the server allows it (STUDIO_ALLOW_REMOTE_CODE)
and the request asks (trust_remote_code), at Check and Start; with both, the check shows the
model's own class and a LoRA run trains through the real worker."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from trainer_core.schemas import TrainingStartRequest

CONFIG_CODE = """from transformers import LlamaConfig


class TinyCustomConfig(LlamaConfig):
    model_type = "tiny_custom"
"""
MODEL_CODE = """from transformers import LlamaForCausalLM

from .configuration_tiny import TinyCustomConfig


class TinyCustomForCausalLM(LlamaForCausalLM):
    config_class = TinyCustomConfig
"""


@pytest.fixture(scope="module")
def custom_model(tmp_path_factory, tiny_model_dir) -> Path:
    """The tiny model as a model that ships its code: config.json's auto_map names two files."""
    import shutil

    folder = tmp_path_factory.mktemp("remote-code") / "tiny-custom"
    shutil.copytree(tiny_model_dir, folder)
    (folder / "configuration_tiny.py").write_text(CONFIG_CODE)
    (folder / "modeling_tiny.py").write_text(MODEL_CODE)
    config = json.loads((folder / "config.json").read_text())
    config["model_type"] = "tiny_custom"
    config["architectures"] = ["TinyCustomForCausalLM"]
    config["auto_map"] = {
        "AutoConfig": "configuration_tiny.TinyCustomConfig",
        "AutoModelForCausalLM": "modeling_tiny.TinyCustomForCausalLM",
    }
    (folder / "config.json").write_text(json.dumps(config))
    return folder


def _settings(folder: Path, datasets_dir: Path, allowed: bool):
    from trainer_core.settings import Settings

    return Settings(
        data_dir=folder.parent / "data",
        allowed_paths=f"{folder.parent}:{datasets_dir}",
        allow_remote_code=allowed,
    )


def _request(folder: Path, datasets_dir: Path, **fields) -> TrainingStartRequest:
    return TrainingStartRequest(
        model_name=str(folder),
        local_datasets=[str(datasets_dir / "alpaca_en_demo.json")],
        max_seq_length=64,
        **fields,
    )


@pytest.mark.parametrize(
    ("allowed", "asked", "words"),
    [
        (
            False,
            True,
            "this server does not run a model's code; its owner can allow it with STUDIO_ALLOW_REMOTE_CODE=1",
        ),
        (True, False, "turn trust_remote_code on if you trust that code"),
    ],
)
def test_a_model_with_its_own_code_is_refused_without_both_keys(custom_model, datasets_dir, allowed, asked, words):
    from trainer_core.admission.admit import PreflightError, admit
    from trainer_core.preflight.check import run_preflight

    settings = _settings(custom_model, datasets_dir, allowed)
    request = _request(custom_model, datasets_dir, trust_remote_code=asked)
    errors = run_preflight(request, settings, estimates=False).errors
    assert [e.code for e in errors] == ["remote_code"] and words in errors[0].message
    assert "modeling_tiny.TinyCustomForCausalLM" in errors[0].message and errors[0].fields == ["trust_remote_code"]
    with pytest.raises(PreflightError, match="^trust_remote_code: "):
        admit(request, settings, None)


def test_with_both_keys_the_check_shows_its_class_and_it_trains(custom_model, datasets_dir, monkeypatch):
    from tests.conftest import train_to_completion
    from trainer_core.preflight.check import run_preflight
    from trainer_core.settings import get_settings

    settings = _settings(custom_model, datasets_dir, True)
    request = _request(custom_model, datasets_dir, trust_remote_code=True, max_steps=2, batch_size=2)
    report = run_preflight(request, settings, estimates=False)
    assert not report.errors and report.architecture == "TinyCustomForCausalLM" and report.adapted_count == 14
    assert report.attention.startswith("sdpa")  # its class (a Llama subclass) says it has SDPA
    monkeypatch.setenv("STUDIO_ALLOW_REMOTE_CODE", "1")  # the worker reads the server's switch from the env
    get_settings.cache_clear()
    try:
        _, _, output_dir = train_to_completion(settings.runs_dir, settings.db_path, request)
    finally:
        monkeypatch.delenv("STUDIO_ALLOW_REMOTE_CODE")
        get_settings.cache_clear()
    structure = json.loads((output_dir / "run.json").read_text())["model_structure"]
    assert structure["adapted"]["count"] == 14
