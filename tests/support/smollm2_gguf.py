"""SmolLM2-135M-Instruct as a Q4_K_M GGUF, made offline once and cached beside the materialized
model (the package ships a Q4_1 file): the model folder converted to f16 by llama.cpp's converter,
then quantised by llama.cpp (``llamacpp.probe`` op ``quantize``), as the app's GGUF export does."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

FILE = "SmolLM2-135M-Instruct-q4_k_m.gguf"


def smollm2_q4_k_m() -> Path:
    """The cached Q4_K_M file (made first, ~30 s, when absent)."""
    from trainer_core.export.gguf_convert import convert
    from trainer_core.llamacpp.client import run_probe
    from trainer_core.models.loading import materialize_default_model
    from trainer_core.settings import get_settings

    settings = get_settings()
    model = materialize_default_model(settings.models_dir)
    target = model.parent / FILE
    if target.is_file():
        return target
    with tempfile.TemporaryDirectory(dir=model.parent) as tmp:
        f16 = Path(tmp) / "f16.gguf"
        convert(model, f16, "f16", settings.gguf_converter_dir, lambda line: None, model_name="SmolLM2-135M-Instruct")
        made = Path(tmp) / FILE
        request = {"op": "quantize", "source": str(f16), "target": str(made), "type": "q4_k_m"}
        run_probe({**request, "threads": os.cpu_count()}, settings.llama_cpp_dir)
        os.replace(made, target)  # whole or not at all
    return target
