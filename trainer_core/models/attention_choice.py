"""Which attention implementation a model family is loaded with.

transformers records per architecture what it supports (``PreTrainedModel._supports_sdpa``,
``_supports_flash_attn``): Gemma 2 (logit soft-capping) and gpt-oss (attention sinks) have no
SDPA path, and forcing ``sdpa`` on them is refused at load. The choice here:

- ``flash_attention_2`` on CUDA when the ``flash_attn`` package is installed and the architecture
  supports it (it takes packed rows natively, from ``position_ids``);
- else ``sdpa`` where supported; training then switches it to the per-row ``sdpa_varlen``
  (``trainer_core.training.attention``) so packed rows never attend to each other;
- else ``eager``; transformers builds a block-diagonal causal mask from the ``position_ids`` of
  packed rows when no attention mask is given and no cache is used
  (``masking_utils.find_packed_sequence_indices``), so padding-free batches stay correct.
"""

from __future__ import annotations

from typing import Any, Optional

SDPA, EAGER, FLASH = "sdpa", "eager", "flash_attention_2"


def model_class(config: Any) -> Any:
    """The model class for ``config`` (a ``PretrainedConfig``) in its kind's auto class
    (``ModelKind.model_class``: ``AutoModelForCausalLM``, ``AutoModelForImageTextToText`` for a
    vision-language model); None when transformers does not map it."""
    from trainer_core.model_kind import kind_of

    auto_class = kind_of(config).model_class()
    try:
        return auto_class._model_mapping[type(config)]
    except KeyError:
        return None


def load_attention(config: Any, device: str) -> Optional[str]:
    """The ``attn_implementation`` to load ``config``'s model with on ``device`` (``cpu`` /
    ``cuda`` / ``mps``): see the module docstring. None for a model transformers does not map
    (one that ships its own code): transformers then asks the model's class."""
    cls = model_class(config)
    if cls is None:
        return None
    if device.startswith("cuda") and getattr(cls, "_supports_flash_attn", False):
        from transformers.utils import is_flash_attn_2_available

        if is_flash_attn_2_available():
            return FLASH
    return SDPA if getattr(cls, "_supports_sdpa", False) else EAGER


def attention_note(implementation: Optional[str]) -> str:
    """How the check names the choice, e.g. ``eager (this architecture has no SDPA path)``."""
    return {
        SDPA: "sdpa (per-row for packed batches)",
        EAGER: "eager (this architecture has no SDPA path)",
        FLASH: "flash_attention_2 (packed rows natively)",
    }.get(implementation, implementation or "the model's own choice (its code)")
