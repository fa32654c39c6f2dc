"""Liger Kernel's fused linear cross-entropy is used only where it applies (``training.kernels``):
a CUDA device, the package installed, a family Liger patches; never on a CPU."""

import sys
import types
from types import SimpleNamespace

import pytest

from trainer_core.training import kernels


@pytest.fixture
def fake_liger(monkeypatch):
    """An installed ``liger_kernel`` that patches Llama and Qwen2 only."""
    patch = types.ModuleType("liger_kernel.transformers.monkey_patch")
    patch.MODEL_TYPE_TO_APPLY_LIGER_FN = {"llama": object(), "qwen2": object()}
    for name in ("liger_kernel", "liger_kernel.transformers"):
        monkeypatch.setitem(sys.modules, name, types.ModuleType(name))
    monkeypatch.setitem(sys.modules, "liger_kernel.transformers.monkey_patch", patch)
    monkeypatch.setattr(kernels.importlib.util, "find_spec", lambda name: object())


def _model(model_type: str) -> SimpleNamespace:
    return SimpleNamespace(config=SimpleNamespace(model_type=model_type))


def test_liger_applies_on_a_gpu_to_the_families_it_patches(fake_liger):
    assert kernels.liger_applies(_model("llama"), "cuda")
    assert kernels.liger_applies(_model("qwen2"), "cuda:1")
    assert not kernels.liger_applies(_model("falcon"), "cuda")  # a family Liger does not patch
    assert not kernels.liger_applies(_model("llama"), "cpu")  # Triton kernels: GPUs only


def test_without_liger_installed_the_own_loss_runs(monkeypatch):
    monkeypatch.setattr(kernels.importlib.util, "find_spec", lambda name: None)
    assert not kernels.liger_applies(_model("llama"), "cuda")


def test_the_sft_config_carries_the_choice(tmp_path):
    from trainer_core.schemas import TrainingStartRequest
    from trainer_core.training.config import build_sft_config

    request = TrainingStartRequest(local_datasets=["x.json"])
    assert build_sft_config(request, tmp_path, "cpu", has_eval=False, liger=True).use_liger_kernel
    assert not build_sft_config(request, tmp_path, "cpu", has_eval=False).use_liger_kernel
