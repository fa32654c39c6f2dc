"""A vision run exported and evaluated, through the CLI a user runs: the merged model
keeps its processor (the folder loads with the model's own classes and answers about an image);
the GGUF export writes llama.cpp's pair of files, the language model and the ``mmproj`` projector
(read back here as GGUF files; llama.cpp runs them with ``--mmproj``; Ollama's Modelfile names
both); ``evaluate`` scores held-out image rows with their pictures."""

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
    """3 steps of the tiny Qwen2-VL on the demo images through the CLI: one logged loss per step,
    LoRA on the language model's blocks only, the adapter and the processor saved."""
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
        "3",
        "--batch-size",
        "2",
        "--output-dir",
        str(out),
    )
    assert trained.returncode == 0 and "completed: Training completed" in trained.stdout, trained.stderr[-2000:]
    metrics = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert [m["step"] for m in metrics] == [1, 2, 3] and all(m["loss"] > 0 for m in metrics)
    adapter = json.loads((out / "adapter_config.json").read_text())
    assert (
        adapter["target_modules"].startswith(r"^model\.language_model\.layers")
        and "visual" not in adapter["target_modules"]
    )
    assert (out / "adapter_model.safetensors").is_file() and (out / "processor_config.json").is_file()
    return out, env


def cli(env: dict, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "trainer_core", *args], cwd=REPO, env=env, capture_output=True, text=True, timeout=600
    )


def test_the_merged_export_keeps_the_processor_and_answers_about_an_image(vision_run, tmp_path, datasets_dir):
    from transformers import AutoModelForImageTextToText

    from trainer_core.kinds.vision.processor import load_processor
    from trainer_core.serving.generate import generate
    from trainer_core.serving.loader import load_choice
    from trainer_core.serving.schemas import ChatMessage, GenerationSettings, ModelChoice

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
    modelfile = (out / "run-f16.Modelfile").read_text()
    assert "FROM ./run-f16.gguf\nFROM ./run-mmproj-f16.gguf\n" in modelfile  # Ollama's way to add the projector
    card = (out / "README.md").read_text()
    assert "| `run-mmproj-f16.gguf` | mmproj-f16 |" in card and "--mmproj" in card


def test_the_run_is_evaluated_on_held_out_image_rows(vision_run, tmp_path, datasets_dir):
    """``evaluate`` reads the held-out file with its images (the run's base reads images), scores
    the answers with each row's pictures and answers every row; the loss counts the answer tokens
    only (the image tokens and prompts are not scored)."""
    run, env = vision_run
    out = tmp_path / "e"
    done = cli(
        env,
        *("evaluate", str(run), "--dataset", str(datasets_dir / "mllm_demo.json"), "--max-rows", "3"),
        *("--max-new-tokens", "4", "--batch-size", "2", "--output", str(out), "--json"),
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["rows_evaluated"] == 3 and result["source"] == "mllm_demo.json"
    for side in ("tuned", "base"):
        assert 0 < result[side]["loss"] < 20 and result[side]["generated_tokens"] == 12
    answers = [
        m["content"]
        for row in json.loads((datasets_dir / "mllm_demo.json").read_text())[:3]
        for m in row["messages"]
        if m["role"] == "assistant"
    ]
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(run)
    expected = sum(len(tokenizer(a + "<|im_end|>", add_special_tokens=False)["input_ids"]) for a in answers)
    assert abs(result["tuned"]["answer_tokens"] - expected) <= 3 * 2, (result["tuned"]["answer_tokens"], expected)
    assert len((out / "predictions.jsonl").read_text().splitlines()) == 3
