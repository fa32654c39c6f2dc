"""Training a vision-language model on the tiny Qwen2-VL: the batches' trained-token mask
holds the answers and never an image token (asserted by decoding), LoRA reaches the vision tower only
when asked, the processor loads and saves without torchvision, and 3 steps through the CLI on
``mllm_demo.json`` leave an adapter and a logged loss per step."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from trainer_core.data.prepare import load_conversations
from trainer_core.data.tokenization import IGNORE
from trainer_core.kinds.vision.collator import VisionCollator, image_token_ids
from trainer_core.kinds.vision.kind import VISION
from trainer_core.kinds.vision.prepare import prepare_vision_rows
from trainer_core.kinds.vision.processor import load_processor
from trainer_core.models.lora_plan import lora_plan
from trainer_core.models.targets import TargetError
from trainer_core.schemas import TrainingStartRequest

REPO = Path(__file__).resolve().parents[4]


@pytest.fixture(scope="module")
def processor(tiny_vl_dir):
    return load_processor(tiny_vl_dir)


@pytest.fixture(scope="module")
def demo_rows(datasets_dir, tiny_vl_dir):
    request = TrainingStartRequest(model_name=str(tiny_vl_dir), local_datasets=[str(datasets_dir / "mllm_demo.json")])
    return load_conversations(request, kind=VISION)[0]


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


def test_the_memory_estimate_counts_the_vision_tower(tiny_vl_dir):
    """The check's parameter count of a vision-language model is the model's own, tower included."""
    from transformers import AutoConfig, AutoModelForImageTextToText

    from trainer_core.preflight.parameters import count_parameters

    config = AutoConfig.from_pretrained(tiny_vl_dir)
    model = AutoModelForImageTextToText.from_pretrained(tiny_vl_dir)
    counts = count_parameters(config, ["all-linear"], 16, True)
    assert counts.vision == sum(p.numel() for name, p in model.named_parameters() if ".visual." in f".{name}")
    assert counts.total == sum(p.numel() for p in model.parameters())


@pytest.mark.slow
@pytest.mark.parametrize("training_type", ["full", "qlora"])
def test_full_and_qlora_train_a_vision_model(training_type, tmp_path, datasets_dir, tiny_vl_dir):
    """The worker's own path (load, data, trainer, save) with the whole model trained, and with the
    language model in 4-bit (bitsandbytes, on this CPU) under LoRA adapters."""
    import queue
    import threading

    from trainer_core.training.worker import train

    request = TrainingStartRequest(
        model_name=str(tiny_vl_dir),
        local_datasets=[str(datasets_dir / "mllm_demo.json")],
        max_steps=1,
        batch_size=2,
        training_type=training_type,
    )
    phase, _ = train(request, "job-vision", tmp_path / "out", queue.Queue(), threading.Event())
    assert phase == "completed"
    saved = "model.safetensors" if training_type == "full" else "adapter_model.safetensors"
    assert (tmp_path / "out" / saved).is_file() and (tmp_path / "out" / "processor_config.json").is_file()


@pytest.mark.slow
def test_a_vision_run_resumes_from_its_checkpoint(tmp_path, datasets_dir, tiny_vl_dir):
    import queue
    import threading

    from trainer_core.training.worker import train

    out = tmp_path / "out"
    base = dict(model_name=str(tiny_vl_dir), local_datasets=[str(datasets_dir / "mllm_demo.json")], batch_size=2)
    first = TrainingStartRequest(**base, max_steps=2, save_steps=1, output_dir=str(out))
    assert train(first, "job-a", out, queue.Queue(), threading.Event())[0] == "completed"
    again = TrainingStartRequest(
        **base, max_steps=3, output_dir=str(out), resume_from_checkpoint=str(out / "checkpoint-1")
    )
    assert train(again, "job-a", out, queue.Queue(), threading.Event())[0] == "completed"
    steps = [json.loads(line)["step"] for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert steps == [1, 2, 3], steps
