"""Training a vision-language model (issue 28) on the tiny Qwen2-VL: the batches' trained-token mask
holds the answers and never an image token (asserted by decoding), LoRA reaches the vision tower only
when asked, the processor loads and saves without torchvision, and 3 steps through the CLI on
``mllm_demo.json`` leave an adapter and a logged loss per step."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from trainer_core.data.prepare import load_conversations
from trainer_core.data.tokenization import IGNORE
from trainer_core.models.lora_plan import lora_plan
from trainer_core.models.targets import TargetError
from trainer_core.schemas import TrainingStartRequest
from trainer_core.vision.collator import VisionCollator, image_token_ids
from trainer_core.vision.prepare import prepare_vision_rows
from trainer_core.vision.processor import load_processor

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def processor(tiny_vl_dir):
    return load_processor(tiny_vl_dir)


@pytest.fixture(scope="module")
def demo_rows(datasets_dir, tiny_vl_dir):
    request = TrainingStartRequest(model_name=str(tiny_vl_dir), local_datasets=[str(datasets_dir / "mllm_demo.json")])
    return load_conversations(request, vision=True)[0]


def test_the_trained_tokens_are_the_answers_and_never_an_image(processor, demo_rows):
    collator = VisionCollator(processor, 1024, train_on_completions=True)
    batch = collator([demo_rows[0], demo_rows[1]])
    image_ids = image_token_ids(processor)
    assert processor.tokenizer.convert_tokens_to_ids("<|image_pad|>") in image_ids
    for i, row in enumerate([demo_rows[0], demo_rows[1]]):
        ids, labels = batch["input_ids"][i], batch["labels"][i]
        trained = labels != IGNORE
        assert (ids[trained] == labels[trained]).all()
        assert not any(int(token) in image_ids for token in ids[trained])
        assert sum(int(token) == processor.image_token_id for token in ids) >= 4 * len(row["images"])
        answers = [m["content"] + "<|im_end|>" for m in row["messages"] if m["role"] == "assistant"]
        assert processor.tokenizer.decode(ids[trained]) == "".join(answers)
    assert batch["pixel_values"].shape[0] == int(batch["image_grid_thw"].prod(dim=1).sum())


def test_without_completions_only_the_images_and_padding_are_unscored(processor, demo_rows):
    batch = VisionCollator(processor, 1024, train_on_completions=False)([demo_rows[2], demo_rows[3]])
    ids, labels, mask = batch["input_ids"], batch["labels"], batch["attention_mask"]
    image = sum(ids == token for token in image_token_ids(processor)).bool()
    assert ((labels == IGNORE) == (image | (mask == 0))).all()


def test_image_size_shrinks_the_image_tokens_and_long_rows_are_left_out(processor, demo_rows):
    full = prepare_vision_rows(demo_rows, VisionCollator(processor, 1024, True), 1024)
    small = prepare_vision_rows(demo_rows, VisionCollator(processor, 1024, True, max_side=56), 1024)
    assert small[2].tokens < full[2].tokens and small[2].images == full[2].images == 8
    assert full[1].rows == 6 and "8 images, 300 x 166 to 300 x 199 px" in full[2].line()
    kept, stats, _ = prepare_vision_rows(demo_rows, VisionCollator(processor, 40, True), 40)
    assert stats.dropped_rows + stats.rows == 6 and stats.dropped_rows >= 1 and len(kept) == stats.rows


def test_vision_layers_get_adapters_only_when_asked(tiny_vl_dir):
    from transformers import AutoModelForImageTextToText

    model = AutoModelForImageTextToText.from_pretrained(tiny_vl_dir)
    base = dict(model_name=str(tiny_vl_dir), local_datasets=["x.json"])
    language = lora_plan(model, TrainingStartRequest(**base)).targets
    assert language.vision == () and language.blocks == "model.language_model.layers" and language.count == 14
    both = lora_plan(model, TrainingStartRequest(**base, finetune_vision_layers=True)).targets
    assert "model.visual.blocks.0.attn.qkv" in both.vision and "model.visual.merger.mlp.0" in both.vision
    assert both.count == 14 + len(both.vision) and "in the vision tower and projector" in both.summary()
    alone = lora_plan(
        model, TrainingStartRequest(**base, finetune_vision_layers=True, finetune_language_layers=False)
    ).targets
    assert alone.modules == () and alone.vision == both.vision
    with pytest.raises(TargetError, match="finetune_language_layers / finetune_vision_layers: both are off"):
        lora_plan(model, TrainingStartRequest(**base, finetune_language_layers=False))


def test_the_processor_loads_and_saves_without_torchvision(processor, tmp_path):
    assert type(processor).__name__ == "Qwen2VLProcessor"
    processor.save_pretrained(tmp_path)
    again = load_processor(tmp_path)
    assert again.image_processor.size == processor.image_processor.size
    assert again.tokenizer.convert_tokens_to_ids("<|image_pad|>") == processor.image_token_id


@pytest.mark.slow
def test_the_cli_trains_three_steps_on_the_demo_images(tmp_path, datasets_dir, tiny_vl_dir):
    out = tmp_path / "run"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "trainer_core",
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
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
        env=dict(os.environ),
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert "completed: Training completed" in done.stdout
    metrics = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert [m["step"] for m in metrics] == [1, 2, 3] and all(m["loss"] > 0 for m in metrics)
    adapter = json.loads((out / "adapter_config.json").read_text())
    assert adapter["target_modules"].startswith(r"^model\.language_model\.layers")
    assert "visual" not in adapter["target_modules"]
    assert (out / "adapter_model.safetensors").is_file() and (out / "processor_config.json").is_file()
