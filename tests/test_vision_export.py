"""A vision run exported (issue 28): the merged model keeps its processor (the folder loads with
the model's own classes and answers about an image), and the GGUF export writes llama.cpp's pair of
files, the language model and the ``mmproj`` projector (read back here as GGUF files; llama.cpp runs
them with ``--mmproj``), through the CLI a user runs."""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def vision_run(tmp_path_factory, datasets_dir, tiny_vl_dir) -> tuple[Path, dict]:
    folder = tmp_path_factory.mktemp("vision-export")
    env = dict(os.environ, STUDIO_DATA_DIR=str(folder / "data"), STUDIO_ALLOWED_PATHS=str(tiny_vl_dir.parent))
    out = folder / "run"
    trained = cli(
        env,
        "train",
        "--dataset",
        str(datasets_dir / "mllm_demo.json"),
        "--model-name",
        str(tiny_vl_dir),
        "--max-steps",
        "2",
        "--batch-size",
        "2",
        "--output-dir",
        str(out),
    )
    assert trained.returncode == 0 and "completed" in trained.stdout, trained.stderr[-2000:]
    return out, env


def cli(env: dict, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "trainer_core", *args], cwd=REPO, env=env, capture_output=True, text=True, timeout=600
    )


def test_the_merged_export_keeps_the_processor_and_answers_about_an_image(vision_run, tmp_path, datasets_dir):
    from transformers import AutoModelForImageTextToText

    from trainer_core.serving.generate import generate
    from trainer_core.serving.loader import load_choice
    from trainer_core.serving.schemas import ChatMessage, GenerationSettings, ModelChoice
    from trainer_core.vision.processor import load_processor

    run, env = vision_run
    exported = cli(env, "export", str(run), "--format", "merged", "--dtype", "float32", "--output", str(tmp_path / "m"))
    assert exported.returncode == 0, exported.stdout[-2000:] + exported.stderr[-2000:]
    merged = tmp_path / "m"
    assert (merged / "processor_config.json").is_file() and (merged / "chat_template.jinja").is_file()
    assert type(AutoModelForImageTextToText.from_pretrained(merged)).__name__ == "Qwen2VLForConditionalGeneration"
    assert type(load_processor(merged)).__name__ == "Qwen2VLProcessor"
    choice = ModelChoice(id="merged", label="merged", kind="final", base_model=str(merged), path=str(merged))
    loaded = load_choice(choice, tmp_path / "models")
    picture = base64.b64encode((datasets_dir / "mllm_demo_data" / "3.jpg").read_bytes()).decode()
    message = ChatMessage(role="user", content="Who is this?", images=[f"data:image/jpeg;base64,{picture}"])
    with_image = generate(loaded, [message.model_dump()], GenerationSettings(temperature=0, max_new_tokens=2), print)
    text_only = generate(
        loaded,
        [{"role": "user", "content": "Who is this?"}],
        GenerationSettings(temperature=0, max_new_tokens=2),
        print,
    )
    assert with_image.prompt_tokens - text_only.prompt_tokens >= 4 + 2  # the picture's tokens and its two markers


def test_the_gguf_export_writes_the_language_model_and_its_projector(vision_run, tmp_path):
    from gguf import GGUFReader

    run, env = vision_run
    out = tmp_path / "g"
    exported = cli(env, "export", str(run), "--format", "gguf-f16", "--output", str(out))
    assert exported.returncode == 0, exported.stdout[-3000:] + exported.stderr[-2000:]
    files = sorted(p.name for p in out.glob("*.gguf"))
    assert len(files) == 2 and any("mmproj" in name for name in files), files
    projector = GGUFReader(next(out.glob("*mmproj*.gguf")))
    keys = set(projector.fields)
    assert any(key.startswith("clip.") for key in keys), sorted(keys)[:20]
    language = GGUFReader(next(p for p in out.glob("*.gguf") if "mmproj" not in p.name))
    assert bytes(language.fields["general.architecture"].parts[-1]).decode() == "qwen2vl"
    result = json.loads((out / "export.json").read_text()) if (out / "export.json").is_file() else None
    if result is not None:
        assert any(f["type"] == "mmproj-f16" for f in result.get("gguf_files", result.get("files", [])))
