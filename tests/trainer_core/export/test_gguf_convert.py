"""Tiny models of every family the studio trains (``tests.support.families.FAMILIES``): each one's f16 GGUF,
converted as an export converts it (the old config keys added, ``export.converter_config``; the
GGUF named after its base), loads and generates in llama.cpp (the studio's build), so a skew
between the converter, transformers, our ``gguf`` pin and llama.cpp shows up here. Gemma, Gemma 2,
Phi-3 and Qwen2 get a small SentencePiece ``tokenizer.model`` (``families.add_sentencepiece``) as
their real checkpoints ship one: their converter builds the GGUF vocabulary from it."""

from __future__ import annotations

import json

import pytest

from tests.support.families import FAMILIES, SENTENCEPIECE, add_sentencepiece, build_family_model
from trainer_core.export.converter_config import add_converter_keys
from trainer_core.export.gguf_convert import convert, missing_message
from trainer_core.export.gguf_meta import file_type_name, read_meta
from trainer_core.llamacpp.build import missing_message as llama_cpp_missing
from trainer_core.llamacpp.client import run_probe
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


@pytest.mark.slow
def test_a_gguf_that_transformers_reads_wrongly_is_judged_by_llama_cpp(tiny_model_dir, tmp_path, monkeypatch):
    """A Qwen3 whose head_dim (16) is not its config class's default (128). transformers'
    GGUF reader ignores ``attention.key_length`` and builds 128-wide heads, so loading the file back
    on its own fails (``MISMATCH ... [64, 64] vs [512, 64]``); the export's check runs the file in llama.cpp, reads it back with the source's
    config for the second opinion, and a reader that still cannot load it is a note, never a refusal."""
    from types import SimpleNamespace

    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from trainer_core.export import gguf_export
    from trainer_core.export import job as jobs
    from trainer_core.models.loading import ModelLoadError

    settings = get_settings()
    for problem in (missing_message(settings.gguf_converter_dir), llama_cpp_missing(settings.llama_cpp_dir)):
        if problem:
            pytest.skip(problem)
    model_dir = build_family_model("qwen3", tiny_model_dir, tmp_path / "qwen3")
    config = json.loads((model_dir / "config.json").read_text(encoding="utf-8"))
    assert config["head_dim"] * config["num_attention_heads"] == config["hidden_size"] != 128 * 4
    add_converter_keys(model_dir)
    target = tmp_path / "out" / "qwen3-f16.gguf"
    target.parent.mkdir()
    convert(model_dir, target, "f16", settings.gguf_converter_dir, lambda line: None, model_name="qwen3 (test)")

    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    source = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32).eval()
    ref = jobs.make_reference(source, tokenizer)
    job = SimpleNamespace(llama_cpp_dir=settings.llama_cpp_dir, progress=jobs.Progress(_Sink(), None), notes=[])
    entry = gguf_export.check_file(job, target, "f16", ref, tokenizer, config, None)
    assert entry.check.checked_by == "llama.cpp" and entry.check.passed, entry.check.summary
    assert entry.second_opinion.checked_by == "transformers" and entry.second_opinion.passed  # shaped by config
    assert entry.check.tokens_equal == entry.check.tokens_total > 0

    def unreadable(*args, **kwargs):
        raise ModelLoadError("could not load the model from x: size mismatch for q_proj")

    monkeypatch.setattr(gguf_export, "load_causal_lm", unreadable)
    assert gguf_export._read_back(job, target, "f16", ref, tokenizer, config) is None  # no second opinion...
    assert (
        "transformers' GGUF reader could not load the file back (size mismatch for q_proj)" in job.notes[-1]
    )  # ...a note
    entry = gguf_export.check_file(job, target, "f16", ref, tokenizer, config, "llama.cpp is not built: run x")
    assert entry.check.checked_by == "metadata" and entry.check.passed  # no reader left: metadata, said so
    assert "llama.cpp is not built" in entry.check.summary


class _Sink:
    def put(self, event) -> None:
        pass
