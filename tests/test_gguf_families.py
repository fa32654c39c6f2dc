"""Tiny models of every family the studio trains (``tests.families.FAMILIES``): each one's f16 GGUF,
converted as an export converts it (the old config keys added, ``export.converter_config``; the
GGUF named after its base), loads and generates in llama.cpp (the studio's build), so a skew
between the converter, transformers, our ``gguf`` pin and llama.cpp shows up here. Gemma, Gemma 2,
Phi-3 and Qwen2 get a small SentencePiece ``tokenizer.model`` (``families.add_sentencepiece``) as
their real checkpoints ship one: their converter builds the GGUF vocabulary from it."""

from __future__ import annotations

import pytest

from tests.families import FAMILIES, SENTENCEPIECE, add_sentencepiece, build_family_model
from trainer_core.export.converter_config import add_converter_keys
from trainer_core.export.gguf_convert import convert, missing_message
from trainer_core.export.gguf_meta import file_type_name, read_meta
from trainer_core.export.llamacpp.client import run_probe
from trainer_core.llamacpp.build import missing_message as llama_cpp_missing
from trainer_core.settings import get_settings


@pytest.mark.slow
@pytest.mark.parametrize("family", FAMILIES)
def test_each_familys_gguf_loads_and_generates_in_llama_cpp(family, tiny_model_dir, datasets_dir, tmp_path):
    settings = get_settings()
    for problem in (missing_message(settings.gguf_converter_dir), llama_cpp_missing(settings.llama_cpp_dir)):
        if problem:
            pytest.skip(problem)
    model = build_family_model(family, tiny_model_dir, tmp_path / family)
    if family in SENTENCEPIECE:
        add_sentencepiece(model, datasets_dir / "c4_demo.jsonl")
    add_converter_keys(model)
    target = tmp_path / f"{family}-f16.gguf"
    convert(model, target, "f16", settings.gguf_converter_dir, lambda line: None, model_name=f"{family} (test)")
    # GPT-NeoX's converter writes no general.file_type (conversion/gptneox.py); llama.cpp's quantizer would
    assert file_type_name(read_meta(target).file_type) == ("" if family == "gpt_neox" else "MOSTLY_F16")
    assert read_meta(target).name == f"{family} (test)"
    answer = run_probe(
        {"op": "generate", "gguf": str(target), "prompt": [1, 2, 3, 4], "max_tokens": 3}, settings.llama_cpp_dir
    )
    assert len(answer["tokens"]) <= 3 and answer["load_seconds"] > 0 and answer["seconds"] >= 0
