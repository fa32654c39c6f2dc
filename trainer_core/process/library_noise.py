"""Library log lines a user of the studio should not see, dropped by exact origin and wording.

- ``bitsandbytes.backends.cpu.ops``: "Failed to load CPU gemm_4bit_forward from kernels-community:
  No module named 'kernels' ...", at every import of bitsandbytes on a CPU with AVX512-BF16
  (bitsandbytes 0.50, ``backends/cpu/ops.py``). The kernel it wants is downloaded from the Hugging
  Face Hub at run time (``kernels.get_kernel``), which an offline studio cannot do even with
  ``kernels`` installed; bitsandbytes then uses its own CPU code for 4-bit layers, which is what
  runs anyway. Nothing for the user to do, so nothing to show.

Installed when ``trainer_core`` is imported (every worker, the forkserver that preloads them, the
CLI), before bitsandbytes can be.
"""

from __future__ import annotations

import logging

NOISE = {"bitsandbytes.backends.cpu.ops": ("Failed to load CPU gemm_4bit_forward from kernels-community",)}


class DropNoise(logging.Filter):
    """Drops the records of one logger whose message starts with one of ``starts``."""

    def __init__(self, starts: tuple[str, ...]) -> None:
        super().__init__()
        self.starts = starts

    def filter(self, record: logging.LogRecord) -> bool:
        """False (dropped) for a known noisy line."""
        return not str(record.msg).startswith(self.starts)


def drop_known_noise() -> None:
    """Attach a ``DropNoise`` filter to each logger in ``NOISE`` (once; idempotent)."""
    for name, starts in NOISE.items():
        logger = logging.getLogger(name)
        if not any(isinstance(f, DropNoise) for f in logger.filters):
            logger.addFilter(DropNoise(starts))
