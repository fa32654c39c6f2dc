"""The causal text LM as a kind (``CAUSAL``): every ``ModelKind`` default is its way, and it reads
every config, so it is the registry's fallback, asked last."""

from __future__ import annotations

from typing import Any, Optional

from trainer_core.model_kind import ModelKind


class CausalKind(ModelKind):
    """A text-only language model (``AutoModelForCausalLM``): any config no other kind claims."""

    name = "causal"
    label = "text"

    def family(self, config: Any) -> Optional[str]:
        """The config's ``model_type`` ("text" where it has none): every config is this kind's."""
        model_type = config.get("model_type") if isinstance(config, dict) else getattr(config, "model_type", None)
        return str(model_type or "text")


CAUSAL = CausalKind()
