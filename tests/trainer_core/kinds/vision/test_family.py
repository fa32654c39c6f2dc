"""The vision path on the other families people fine-tune: tiny LLaVA, Gemma 3 and
Idefics3 models (``tests/support/vision_families.py``) are found from their config, their processors load,
the batches of ``mllm_demo.json`` score the answers and never an image token (decoded), LoRA finds
their language blocks and, when asked, their vision tower and projector, and two steps train."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from tests.support.vision_families import VISION_FAMILIES, build_vision_family
from trainer_core.data.prepare import load_conversations
from trainer_core.data.tokenization import IGNORE
from trainer_core.kinds.vision.collator import VisionCollator, image_token_ids
from trainer_core.kinds.vision.family import folder_family
from trainer_core.kinds.vision.kind import VISION
from trainer_core.kinds.vision.processor import load_processor
from trainer_core.models.lora_plan import lora_plan
from trainer_core.schemas import TrainingStartRequest

pytestmark = pytest.mark.slow  # three models built and trained: about 20 s
NAMES = {"llava": "LLaVA", "gemma3": "Gemma 3", "idefics3": "Idefics3"}


@pytest.fixture(scope="module", params=VISION_FAMILIES)
def family_dir(request, tmp_path_factory, tiny_model_dir) -> tuple[str, Path]:
    folder = tmp_path_factory.mktemp(f"vision-{request.param}") / request.param
    return request.param, build_vision_family(request.param, tiny_model_dir, folder)


def test_each_family_trains_on_the_demo_images_with_answers_only(family_dir, datasets_dir, tmp_path):
    from transformers import AutoModelForImageTextToText

    from trainer_core.training.trainer import build_trainer

    family, folder = family_dir
    assert folder_family(folder).name == NAMES[family]
    processor = load_processor(folder)
    request = TrainingStartRequest(
        model_name=str(folder), local_datasets=[str(datasets_dir / "mllm_demo.json")], max_steps=2, batch_size=2
    )
    rows = load_conversations(request, kind=VISION)[0]
    batch = VisionCollator(processor, 2048, train_on_completions=True)([rows[0], rows[1]])
    images = image_token_ids(processor)
    for i, row in enumerate([rows[0], rows[1]]):
        ids, labels = batch["input_ids"][i], batch["labels"][i]
        trained = ids[labels != IGNORE]
        assert not any(int(token) in images for token in trained)
        assert sum(int(token) in images for token in ids) > len(row["images"])  # expanded images
        decoded = processor.tokenizer.decode(trained)
        for answer in (m["content"] for m in row["messages"] if m["role"] == "assistant"):
            assert answer in decoded, (family, decoded)
        assert "Who" not in decoded and "<image>" not in decoded  # the questions and markers are not scored
    model = AutoModelForImageTextToText.from_pretrained(folder)
    vision = lora_plan(model, request.model_copy(update={"finetune_vision_layers": True})).targets
    assert vision.vision and vision.modules, (family, vision)
    from trainer_core.kinds.vision.prepare import prepare_vision_rows

    train, _, _ = prepare_vision_rows(rows, VisionCollator(processor, 512, True), 512)
    logs: list[float] = []
    from transformers import TrainerCallback

    class Losses(TrainerCallback):
        def on_log(self, args, state, control, **kwargs):
            if kwargs.get("logs") and "loss" in kwargs["logs"]:
                logs.append(kwargs["logs"]["loss"])

    trainer = build_trainer(request, model, processor, train, None, tmp_path, "cpu", [Losses()])
    trainer.train()
    assert trainer.state.global_step == 2 and all(math.isfinite(x) for x in logs) and len(logs) == 2
