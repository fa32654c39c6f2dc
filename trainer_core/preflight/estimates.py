"""The pre-flight check's cost estimates: peak memory (``memory``) and run time (``timing``).

``estimate_memory(request, model_config, longest_batch_tokens, device)`` -> ``MemoryEstimate``;
``estimate_time(request, model_config, train_tokens_per_epoch, total_steps, eval_tokens, evaluations,
device, history)`` -> ``TimeEstimate``. Their accuracy against measured runs: ``bench/preflight.py``.
"""

from trainer_core.preflight.memory import MemoryEstimate, estimate_memory
from trainer_core.preflight.timing import TimeEstimate, estimate_time

__all__ = ["MemoryEstimate", "TimeEstimate", "estimate_memory", "estimate_time"]
