"""Which dtype a run computes in: bf16 where the device has fast bf16 units, fp32 elsewhere.

``mixed_precision`` (a ``TrainingStartRequest`` field, accelerate's name) is ``auto``, ``bf16`` or
``no``. ``auto`` picks bf16 on CUDA GPUs that support it, and on CPUs whose bf16 matrix products are
measurably faster than fp32 ones: the CPU must list AMX-BF16 or AVX512-BF16 among its flags
(``/proc/cpuinfo``), and a short matmul probe (``probe_rates``: fp32 against bf16 products of
512-square matrices, about 0.4 s) must find bf16 at least ``FAST_RATIO`` times the fp32 rate. The
probe's answer is cached per CPU model, flags and torch version (``precision_cache.json`` beside the
models folder), so a machine probes once. Machines differ (docs/BENCHMARKS.md): one CPU ran bf16 at
0.3 GFLOP/s against 177 fp32, another at 1,305 against 342 (AMX), this one at 400 against 180
(AVX512-BF16); hence detect, never assume.

Mixed precision keeps fp32 master weights for everything trained (transformers' ``bf16=True``:
``torch.autocast`` around the forward pass); a LoRA run also stores its frozen base weights in bf16
(``weights_dtype``), which halves their memory and spares autocast a cast of each weight per step.
"""

from __future__ import annotations

import json
import platform
import subprocess
import sys
import time
from importlib import metadata
from pathlib import Path
from typing import Any, Literal, Optional

from pydantic import BaseModel, Field

MixedPrecision = Literal["auto", "bf16", "no"]
BF16_FLAGS = ("amx_bf16", "avx512_bf16")
FAST_RATIO = 1.3  # bf16 products must beat fp32 ones by this much for auto to pick bf16
CACHE_NAME = "precision_cache.json"
PROBE_VERSION = 2  # part of the cache key: a new probe measures again


class Precision(BaseModel):
    """The precision a run uses and why, as shown by the check and kept in ``run.json``.

    ``dtype``: "bf16" or "fp32" (the compute dtype); ``weights``: the dtype the frozen base weights
    are stored in; ``reason``: one sentence naming the measurement or the setting that decided;
    ``attention``: the dtype of the attention products."""

    dtype: Literal["bf16", "fp32"]
    weights: Literal["bf16", "fp32"]
    reason: str
    attention: Literal["bf16", "fp32"] = Field(
        "fp32", description="The dtype attention computes in: fp32 in a bf16 run where bf16 attention measured slower."
    )


class CpuRates(BaseModel):
    """A CPU's measured matmul rates in GFLOP/s and attention times in ms (``probe_rates``) and its
    bf16 flags."""

    cpu: str
    flags: list[str]
    fp32_gflops: float
    bf16_gflops: float
    attention_fp32_ms: float
    attention_bf16_ms: float

    @property
    def fp32_attention(self) -> bool:
        """True when bf16 attention (forward and backward) is slower than fp32 on this CPU: a bf16
        run then computes its attention in fp32 (AVX512-BF16 without AMX: 1.8x slower here)."""
        return self.attention_bf16_ms > self.attention_fp32_ms

    @property
    def fast_bf16(self) -> bool:
        """True when bf16 products run at least ``FAST_RATIO`` times the fp32 rate."""
        return self.bf16_gflops >= FAST_RATIO * self.fp32_gflops


def cpu_name_and_flags() -> tuple[str, list[str]]:
    """The CPU's model name and which of ``BF16_FLAGS`` it lists (Linux ``/proc/cpuinfo``; elsewhere
    ``platform.processor()`` and no flags, so auto stays fp32 there)."""
    try:
        text = Path("/proc/cpuinfo").read_text(errors="replace")
    except OSError:
        return platform.processor() or "unknown", []
    name = next((line.split(":", 1)[1].strip() for line in text.splitlines() if line.startswith("model name")), "")
    words = set(next((line.split(":", 1)[1].split() for line in text.splitlines() if line.startswith("flags")), []))
    return name or platform.processor() or "unknown", [flag for flag in BF16_FLAGS if flag in words]


def _best_seconds(work: Any, seconds: float) -> float:
    """The shortest of back-to-back calls of ``work`` over about ``seconds``, after a warm-up call."""
    work()
    best, deadline = float("inf"), time.perf_counter() + seconds
    while time.perf_counter() < deadline or best == float("inf"):
        began = time.perf_counter()
        work()
        best = min(best, time.perf_counter() - began)
    return max(best, 1e-9)


def probe_rates(size: int = 512, seconds: float = 0.2) -> tuple[float, float, float, float]:
    """(fp32 GFLOP/s, bf16 GFLOP/s, fp32 attention ms, bf16 attention ms): ``size``-square
    ``torch.mm`` products (2 size^3 FLOPs each), and the forward and backward of causal
    ``scaled_dot_product_attention`` over 9 heads x 192 tokens x 64 (one row of a training batch
    of SmolLM2's shape); each the best of about ``seconds`` of back-to-back calls."""
    import torch
    import torch.nn.functional as F

    def product(dtype: Any) -> float:
        a, b = torch.randn(size, size, dtype=dtype), torch.randn(size, size, dtype=dtype)
        return 2 * size**3 / _best_seconds(lambda: torch.mm(a, b), seconds) / 1e9

    def attention(dtype: Any) -> float:
        q, k, v = (torch.randn(1, 9, 192, 64, dtype=dtype, requires_grad=True) for _ in range(3))
        work = lambda: F.scaled_dot_product_attention(q, k, v, is_causal=True).sum().backward()  # noqa: E731
        return _best_seconds(work, seconds) * 1e3

    return product(torch.float32), product(torch.bfloat16), attention(torch.float32), attention(torch.bfloat16)


def _cache_path() -> Path:
    from trainer_core.settings import get_settings

    return Path(get_settings().models_dir).parent / CACHE_NAME


def cpu_rates(cache: Optional[Path] = None) -> Optional[CpuRates]:
    """This CPU's matmul rates, from the cache (``cache``, default beside the models folder) or a
    new probe (``probe_rates``, in a child process so that the app process never imports torch;
    about 3 s once per machine) written to it; None when the CPU lists no bf16 flag (no probe: bf16
    would be emulated) or the probe fails. A cache that cannot be read or written is ignored."""
    name, flags = cpu_name_and_flags()
    if not flags:
        return None
    path = cache or _cache_path()
    key = f"{name}|{','.join(flags)}|torch {metadata.version('torch')}|probe {PROBE_VERSION}"
    try:
        known = json.loads(path.read_text())
    except (OSError, ValueError):
        known = {}
    known = known if isinstance(known, dict) else {}
    if isinstance(known.get(key), dict):
        try:
            return CpuRates.model_validate(known[key])
        except ValueError:
            pass
    try:
        done = subprocess.run(
            [sys.executable, "-m", "trainer_core.models.precision"], capture_output=True, text=True, timeout=120
        )
        fp32, bf16, attention_fp32, attention_bf16 = json.loads(done.stdout.strip().splitlines()[-1])
    except (OSError, subprocess.SubprocessError, ValueError, IndexError, TypeError):
        return None
    rates = CpuRates(
        cpu=name,
        flags=flags,
        fp32_gflops=round(fp32, 1),
        bf16_gflops=round(bf16, 1),
        attention_fp32_ms=round(attention_fp32, 3),
        attention_bf16_ms=round(attention_bf16, 3),
    )
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps({**known, key: rates.model_dump()}, indent=1))
    except OSError:
        pass
    return rates


def choose_precision(
    device: str, mixed_precision: MixedPrecision = "auto", training_type: str = "lora", training_method: str = "sft"
) -> Precision:
    """The precision for a run on ``device`` ("cpu" or "cuda[:N]") with the ``mixed_precision``
    setting, ``training_type`` (lora / qlora / full) and ``training_method`` (sft, dpo, grpo, ...):
    see the module docstring. ``bf16`` is honoured on every CPU (slow without bf16 units); ``no``
    is fp32. Frozen base weights are stored in bf16 for LoRA / QLoRA on a CPU, and for every run on
    a bf16 GPU (as before); a full fine-tuning run on a CPU keeps fp32 weights (the master copy
    autocast reads). On a CPU ``auto`` keeps fp32 for the methods other than SFT: they compare the
    log-probabilities of two models (policy and reference), and bf16 was not measured for them.
    Raises ValueError naming ``mixed_precision`` for bf16 on a GPU without bf16 support."""
    lora = training_type in ("lora", "qlora")
    if mixed_precision == "no":
        return Precision(dtype="fp32", weights="fp32", reason="mixed_precision is no: fp32 throughout")
    if device.startswith("cuda"):
        import torch

        if torch.cuda.is_available() and torch.cuda.is_bf16_supported():
            return Precision(dtype="bf16", weights="bf16", attention="bf16", reason="this GPU supports bf16")
        if mixed_precision == "bf16":
            raise ValueError("mixed_precision: this GPU has no bf16 support; choose auto or no")
        return Precision(dtype="fp32", weights="fp32", reason="this GPU has no bf16 support: fp32")
    weights = "bf16" if lora else "fp32"
    if mixed_precision == "bf16":
        return Precision(dtype="bf16", weights=weights, attention="bf16", reason="mixed_precision is bf16 (asked for)")
    if training_method != "sft":
        return Precision(
            dtype="fp32",
            weights="fp32",
            reason=f"{training_method} compares the log-probabilities of two models: auto keeps fp32 on a CPU "
            "(set mixed_precision to bf16 to override)",
        )
    rates = cpu_rates()
    if rates is None:
        return Precision(dtype="fp32", weights="fp32", reason="this CPU has no bf16 units (no AMX / AVX512-BF16): fp32")
    measured = f"bf16 matmul {rates.bf16_gflops:.0f} vs fp32 {rates.fp32_gflops:.0f} GFLOP/s on this CPU"
    if not rates.fast_bf16:
        return Precision(dtype="fp32", weights="fp32", reason=f"{measured}: bf16 does not pay, fp32")
    attention = "fp32" if rates.fp32_attention else "bf16"
    note = (
        f"; attention in fp32 (bf16 {rates.attention_bf16_ms:.2f} vs fp32 {rates.attention_fp32_ms:.2f} ms)"
        if attention == "fp32"
        else ""
    )
    return Precision(
        dtype="bf16",
        weights=weights,
        attention=attention,
        reason=f"{measured} ({', '.join(rates.flags)}): bf16 mixed precision{note}",
    )


def request_precision(request: Any, device: str) -> Precision:
    """``choose_precision`` for a ``TrainingStartRequest`` on ``device``; a run that trains whole
    modules beside its adapters (``modules_to_save``) loads its weights in fp32 on a CPU, so those
    trained copies start from the exact weights, not from bf16-rounded ones (autocast still computes
    in bf16)."""
    chosen = choose_precision(
        device, request.mixed_precision, request.training_type.value, request.training_method.value
    )
    if request.modules_to_save and not device.startswith("cuda") and chosen.weights == "bf16":
        return chosen.model_copy(
            update={"weights": "fp32", "reason": chosen.reason + "; weights in fp32 (modules_to_save)"}
        )
    return chosen


def torch_dtype(name: str) -> Any:
    """``torch.bfloat16`` for "bf16", ``torch.float32`` for "fp32"."""
    import torch

    return torch.bfloat16 if name == "bf16" else torch.float32


if __name__ == "__main__":  # the probe of ``cpu_rates``: prints probe_rates() as JSON
    print(json.dumps(probe_rates()))
