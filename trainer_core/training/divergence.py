"""Stop a run that has diverged (``TrainingStartRequest.stop_on_divergence``, on by default).

Three rules, checked on every logged step (``logging_steps``; transformers' NaN filter is off, see
``training.config``):

- **non-finite**: the loss or the gradient norm is NaN or infinite;
- **exploded**: the loss is above ``EXPLODE_FACTOR`` x its reference *and* above the reference +
  ``EXPLODE_MARGIN`` nats for ``EXPLODE_STEPS`` logged steps in a row; the reference is the lowest
  of the first ``REFERENCE_STEPS`` logged losses. A healthy run's loss falls from its start: a loss
  several times higher that stays there is a divergence, not noise (the loss-spike rule of large
  runs, e.g. PaLM's restarts, Chowdhery et al. 2022, section 5.1, in a simpler form). Measured case:
  lr 0.999 without clipping, full fine-tuning of SmolLM2: 2.21 -> 130.7 -> 1181.3;
- **collapsed** (SFT only, where the loss is a cross-entropy over the vocabulary of V tokens): the
  loss within ``COLLAPSE_NATS`` of ln V, the loss of a uniform guess, with a gradient norm under
  ``COLLAPSE_GRAD`` for ``COLLAPSE_STEPS`` logged steps in a row: the model predicts nothing and
  nothing moves it. Measured case: LoRA at lr 0.999 on SmolLM2 settling at 10.80 = ln 49,152.

``DivergenceGuard`` raises ``DivergenceError`` naming the step, the rule and the last checkpoint
saved before the trouble began (the one to resume from, with a lower learning rate); the worker ends
the run in ``error`` with that message, which the status and the run record keep.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Optional

from transformers import TrainerCallback

from trainer_core.training.safe_saves import DivergenceError, divergence_message

REFERENCE_STEPS = 3
EXPLODE_FACTOR = 4.0
EXPLODE_MARGIN = 2.0
EXPLODE_STEPS = 2
COLLAPSE_NATS = 0.05
COLLAPSE_GRAD = 1e-4
COLLAPSE_STEPS = 3


class LossWatch:
    """The rules above over a stream of logged (step, loss, grad_norm); ``vocab_size`` None turns
    the collapse rule off (preference losses are not cross-entropies over the vocabulary)."""

    def __init__(self, vocab_size: Optional[int] = None) -> None:
        self.uniform = math.log(vocab_size) if vocab_size else None
        self.first: list[float] = []
        self.exploding: list[int] = []  # steps of the current run of exploded losses
        self.collapsing: list[int] = []

    @property
    def reference(self) -> Optional[float]:
        return min(self.first) if self.first else None

    def see(self, step: int, loss: Optional[float], grad_norm: Optional[float]) -> Optional[tuple[int, str]]:
        """Record one logged step; (the step the trouble began, what happened) when a rule fires."""
        for name, value in (("loss", loss), ("grad_norm", grad_norm)):
            if value is not None and not math.isfinite(value):
                return step, f"{name} is {value}"
        if loss is None:
            return None
        reference = self.reference
        if len(self.first) < REFERENCE_STEPS:
            self.first.append(loss)
        flat = grad_norm is not None and grad_norm < COLLAPSE_GRAD
        uniform = self.uniform is not None and abs(loss - self.uniform) < COLLAPSE_NATS and flat
        high = reference is not None and loss > EXPLODE_FACTOR * reference and loss > reference + EXPLODE_MARGIN
        if high and not uniform:  # a loss stuck at ln V with no gradient is a collapse (below)
            self.exploding.append(step)
        else:
            self.exploding.clear()
        if len(self.exploding) >= EXPLODE_STEPS:
            return self.exploding[0], (
                f"the loss exploded to {loss:.4g} (it started at {reference:.4g}; the rule: above "
                f"{EXPLODE_FACTOR:g}x the start and {EXPLODE_MARGIN:g} nats above it for {EXPLODE_STEPS} logged steps)"
            )
        if uniform:
            self.collapsing.append(step)
        else:
            self.collapsing.clear()
        if len(self.collapsing) >= COLLAPSE_STEPS:
            return self.collapsing[0], (
                f"the model collapsed to a uniform guess: loss {loss:.4g} = ln(vocabulary) with a gradient norm "
                f"under {COLLAPSE_GRAD:g} for {COLLAPSE_STEPS} logged steps"
            )
        return None


def last_checkpoint_before(output_dir: Path, step: int) -> Optional[Path]:
    """The newest complete ``checkpoint-N`` in ``output_dir`` with N < ``step``, or None."""
    found: Sequence[tuple[int, Path]] = sorted(
        (int(p.name.split("-")[1]), p)
        for p in Path(output_dir).glob("checkpoint-*")
        if p.name.split("-")[1].isdigit() and p.is_dir()
    )
    good = [path for number, path in found if number < step]
    return good[-1] if good else None


class DivergenceGuard(TrainerCallback):
    """Raises DivergenceError when a ``LossWatch`` rule fires on a logged step (put it after the
    progress callback, so that step is still reported). The collapse rule uses the model's
    vocabulary size (``vocab_size`` of its config) unless ``collapse`` is False."""

    def __init__(self, collapse: bool = True) -> None:
        self.collapse = collapse
        self.watch: Optional[LossWatch] = None

    def on_log(self, args, state, control, logs=None, model=None, **kwargs):  # noqa: D102
        if self.watch is None:
            vocab = getattr(getattr(model, "config", None), "vocab_size", None) if self.collapse else None
            self.watch = LossWatch(vocab if isinstance(vocab, int) else None)
        logs = logs or {}
        loss, grad = logs.get("loss"), logs.get("grad_norm")
        fired = self.watch.see(
            state.global_step,
            float(loss) if isinstance(loss, (int, float)) else None,
            float(grad) if isinstance(grad, (int, float)) else None,
        )
        if fired is None:
            return
        began, what = fired
        good = last_checkpoint_before(Path(args.output_dir), began) if args is not None else None
        where = f" The last checkpoint before it is {good}: resume from it." if good else ""
        raise DivergenceError(divergence_message(state.global_step, what) + where)
