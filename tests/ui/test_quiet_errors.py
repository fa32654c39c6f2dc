"""Noise a user should not see: bitsandbytes' offline kernel warning, and the
hardware line's meaningless first CPU sample. (Probes without a token: tests/e2e/test_share_security;
a refused file value's traceback: tests/e2e/test_security.)"""

from __future__ import annotations

import logging
import subprocess
import sys
import time

import trainer_core  # noqa: F401 - installs the filter, as every worker's import does
from trainer_core import hardware


def test_bitsandbytes_offline_kernel_warning_is_dropped_and_its_other_lines_kept(caplog):
    ops = logging.getLogger("bitsandbytes.backends.cpu.ops")
    with caplog.at_level(logging.WARNING):
        ops.warning(  # bitsandbytes 0.50's exact call (backends/cpu/ops.py) on an AVX512-BF16 CPU
            "Failed to load CPU gemm_4bit_forward from kernels-community: %s. Please make sure you already "
            "`pip install kernels` and the kernels >= 0.11.1",
            ModuleNotFoundError("No module named 'kernels'"),
        )
        ops.warning("another bitsandbytes warning")
    assert [r.getMessage() for r in caplog.records] == ["another bitsandbytes warning"]


def test_the_first_hardware_sample_measures_the_cpu_instead_of_reading_zero(monkeypatch):
    monkeypatch.setattr(hardware, "_cached", None)
    monkeypatch.setattr(hardware, "_cpu_sampled_at", None)  # a fresh app: no sample yet
    busy = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        time.sleep(0.3)
        first = hardware.cached_snapshot(max_age_s=0).cpu_percent
    finally:
        busy.kill()
        busy.wait()
    assert first >= 100 / hardware.psutil.cpu_count() / 2, first  # one core kept busy: not psutil's first 0.0


def test_scrubbed_messages_and_log_lines_hold_no_quoted_secret_and_no_forged_line():
    from ui.quiet_errors import scrub
    from ui.refused import one_line

    secret = "hf_SecretToken1234" + "'\"\n\x00"
    gradio_text = f"Value: {secret!r} (type: <class 'str'>) is not in the list of choices: ['adapter']"
    assert "SecretToken" not in scrub(gradio_text, [None, {"field": secret}])
    assert "SecretToken" not in scrub(f"key {secret!r}", [{secret: 1}])  # dict keys too
    assert one_line("x\n2026-12-04 INFO forged\r") == "x\\n2026-12-04 INFO forged\\r"


def test_a_data_error_quoting_disk_words_is_not_a_full_disk():
    from trainer_core.process.disk_full import is_disk_full

    assert not is_disk_full(ValueError("row 3 says: No space left on device"))
    assert is_disk_full(RuntimeError("Error while serializing: I/O error: No space left on device (os error 28)"))
