"""GGUF through llama.cpp: the request's formats, the tools' lines as words, a missing or
mismatched llama.cpp build refused with the command that builds it, before any work. (Quantised
formats made in one task and each checked by llama.cpp itself, on the real model:
``tests/e2e/test_export_real.py``; its figures: ``bench/export.py``.)"""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest
from pydantic import ValidationError

from trainer_core.export.gguf_convert import Cancelled
from trainer_core.export.gguf_export import _on_line, _on_quantize_line
from trainer_core.export.schemas import ExportRequest
from trainer_core.export.start import export_refusal
from trainer_core.llamacpp import build as tools
from trainer_core.llamacpp.client import LlamaCppFailed, LlamaCppMissing, run_probe
from trainer_core.refusals import explain
from trainer_core.serving.schemas import ModelChoice
from trainer_core.settings import get_settings
from ui.export_panel import export, format_choices, gguf_type_choices, on_screen


class Events(list):
    def put(self, event):
        self.append(event)


def _llama_cpp() -> Path:
    folder = get_settings().llama_cpp_dir
    problem = tools.missing_message(folder)
    if problem:  # .ci/run fails before the tests when it is missing (scripts/setup.sh builds it)
        pytest.skip(problem)
    return folder


def test_a_missing_or_foreign_build_is_refused_naming_the_command(tmp_path, monkeypatch):
    empty = tmp_path / "none"
    assert "not built in" in tools.missing_message(empty) and "bash scripts/setup.sh" in tools.missing_message(empty)
    with pytest.raises(LlamaCppMissing, match="bash scripts/setup.sh"):
        run_probe({"op": "check"}, empty)
    built = tmp_path / "built"
    (built / "llama_cpp").mkdir(parents=True)
    (built / "llama_cpp" / "__init__.py").write_text("")
    tools.write_stamp(built, 300)
    assert "incomplete (no llama_cpp/lib/libllama)" in tools.missing_message(built)  # a copy without its library
    (built / "llama_cpp" / "lib").mkdir()
    (built / "llama_cpp" / "lib" / "libllama.so").write_bytes(b"")
    assert tools.missing_message(built) is None
    stamp = json.loads((built / tools.STAMP).read_text())
    (built / tools.STAMP).write_text(json.dumps({**stamp, "version": "0.2.0"}))
    assert "0.2.0, not " + tools.VERSION in tools.missing_message(built)
    (built / tools.STAMP).write_text(json.dumps({**stamp, "cpu_features": ["avx512f", "amx_tile"]}))
    monkeypatch.setattr(tools, "cpu_features", lambda: ("avx", "avx2", "fma"))
    assert "built for another CPU (features avx512f, amx_tile)" in tools.missing_message(built)


def test_formats_requests_and_refusals(tmp_path, tiny_model_dir):
    assert ExportRequest(model="j", format="gguf-q4_k_m", gguf_types=["q8_0", "q4_k_m", "q8_0"]).gguf_list() == [
        "q4_k_m",
        "q8_0",
    ]
    with pytest.raises(ValidationError, match="gguf_types"):
        ExportRequest(model="j", format="merged", gguf_types=["q8_0"])
    with pytest.raises(ValidationError):
        ExportRequest(model="j", format="gguf-q3_k_s")
    full = ModelChoice(
        id="j", label="", kind="final", base_model="", path=str(tiny_model_dir), job_id="j", adapter=False
    )
    settings = get_settings()

    def refuse(fmt, more=(), llama=tmp_path / "none"):
        request = ExportRequest(model="j", format=fmt, gguf_types=list(more))
        return export_refusal(full, request, settings.gguf_converter_dir, settings.models_dir, llama)

    assert refuse("gguf-f16") is None and refuse("gguf-q8_0", ["bf16"]) is None  # the converter alone makes them
    refused = refuse("gguf-f16", ["q4_k_m", "q6_k"])
    assert refused.startswith("GGUF q4_k_m, q6_k:") and "bash scripts/setup.sh" in refused
    labels = dict((value, label) for label, value in format_choices(None, "not built"))
    assert labels["gguf-q4_k_m"] == "gguf-q4_k_m (needs llama.cpp: bash scripts/setup.sh)"
    assert labels["gguf-q8_0"] == "gguf-q8_0" and labels["merged"] == "merged"
    assert all(value == label for label, value in format_choices(None, None))
    boxes = dict((value, label) for label, value in gguf_type_choices("not built"))
    assert boxes["q6_k"] == "q6_k (needs llama.cpp)" and boxes["q8_0"] == "q8_0" and boxes["f16"] == "f16"
    assert all(value == label for label, value in gguf_type_choices(None))
    # a type ticked twice is one file, not a count over the limit; refusals use the labels on screen
    assert ExportRequest(model="j", format="gguf-f16", gguf_types=["q8_0"] * 8).gguf_types == ["q8_0"]
    with pytest.raises(ValidationError) as error:
        ExportRequest(model="j", format="merged", gguf_types=["q8_0"])
    assert on_screen(explain(error.value)) == "More GGUF formats: more GGUF formats need a gguf-* format, not 'merged'"


def test_a_raw_export_call_with_a_non_text_model_is_refused_by_its_label():
    class Tasks:
        def list(self, *args):
            return []

    for model in (12345, {"a": 1}, ["x"], None, "  "):
        (status, _, _), *_ = list(export(Tasks(), model, model, "gguf-q8_0", "float16", []))
        assert "Weights to export: click a run with saved weights" in str(status), status


def test_probe_failures_are_named_and_cancel_kills_it(tmp_path):
    folder = _llama_cpp()
    with pytest.raises(LlamaCppFailed, match="llama.cpp failed"):
        run_probe(
            {
                "op": "quantize",
                "source": str(tmp_path / "none.gguf"),
                "target": str(tmp_path / "o.gguf"),
                "type": "q4_k_m",
            },
            folder,
        )
    assert not (tmp_path / "o.gguf").exists()
    with pytest.raises(Cancelled):
        run_probe({"op": "check"}, folder, should_stop=lambda: True)


def test_the_tools_lines_become_words_on_the_page():
    """llama.cpp's quantizer and converter lines become a progress sentence; their logs do not."""
    say = []
    job = SimpleNamespace(progress=SimpleNamespace(say=lambda m, **k: say.append(m)))
    _on_quantize_line(job, "q4_k_m", "[  11/ 272]  blk.0.ffn_up.weight - [  576,  1536,     1,     1], type =    f16")
    _on_line(job, "f16", "Writing:  45%|####5     | 12.0M/26.7M [00:01<00:01, 9.87Mbyte/s]")
    _on_line(job, "f16", "INFO:hf-to-gguf:Loading model: merged")
    assert say == ["Quantising to q4_k_m with llama.cpp: tensor 11 of 272", "Converting to GGUF f16: 45% written"]
