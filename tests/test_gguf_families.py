"""Tiny models of the families whose tiny fixtures llama.cpp's converter converts: each one's f16
GGUF loads and generates in llama.cpp (the studio's build), so a skew between the converter, our
``gguf`` pin and llama.cpp shows up here. The other fixtures (Gemma, Gemma 2 and Phi-3 without a
``tokenizer.model``; GPT-2, Falcon, GPT-NeoX, Qwen2 with the bundled tokenizer; gpt-oss) stop in the
converter on what the tiny fixture lacks, not in llama.cpp: listed in the issue's note."""

from __future__ import annotations

import pytest

from tests.families import build_family_model
from trainer_core.export.gguf_convert import convert, missing_message
from trainer_core.export.gguf_meta import file_type_name, read_meta
from trainer_core.export.llamacpp.client import run_probe
from trainer_core.export.llamacpp.tools import missing_message as llama_cpp_missing
from trainer_core.settings import get_settings

CONVERTED = (
    "llama",
    "mistral",
    "qwen3",
    "qwen3_moe",
    "mixtral",
    "gemma3_text",
    "starcoder2",
    "olmo2",
    "granite",
    "phi",
)


@pytest.mark.slow
@pytest.mark.parametrize("family", CONVERTED)
def test_each_familys_gguf_loads_and_generates_in_llama_cpp(family, tiny_model_dir, tmp_path):
    settings = get_settings()
    for problem in (missing_message(settings.gguf_converter_dir), llama_cpp_missing(settings.llama_cpp_dir)):
        if problem:
            pytest.skip(problem)
    model = build_family_model(family, tiny_model_dir, tmp_path / family)
    target = tmp_path / f"{family}-f16.gguf"
    convert(model, target, "f16", settings.gguf_converter_dir, lambda line: None)
    assert file_type_name(read_meta(target).file_type) == "MOSTLY_F16"
    answer = run_probe(
        {"op": "generate", "gguf": str(target), "prompt": [1, 2, 3, 4], "max_tokens": 3}, settings.llama_cpp_dir
    )
    assert len(answer["tokens"]) <= 3 and answer["load_seconds"] > 0 and answer["seconds"] >= 0
