"""The same constraint for a GGUF served by llama.cpp (``serving.gguf_worker``): the llguidance
matcher of ``constrain.compiled`` over llama.cpp's own vocabulary, applied as a llama-cpp-python
logits processor (numpy: the worker never imports torch).

llguidance rather than a GBNF grammar: llama-cpp-python's JSON-schema-to-GBNF converter (0.3.36)
drops keywords such as an integer's ``minimum`` / ``maximum`` (a constrained call answered
``"days": 932352517`` for ``maximum: 14``), while this path enforces exactly what the transformers
path enforces and refuses the same schemas. Runs where ``llama_cpp`` imports (the GGUF worker).
"""

from __future__ import annotations

import warnings
from functools import lru_cache
from typing import Any

from trainer_core.tools.constrain import Constraint, JsonConstraintProcessor, compiled


@lru_cache(maxsize=2)
def stop_ids(llm: Any) -> tuple[int, ...]:
    """The end-of-generation ids of ``llm``'s vocabulary (eos, end-of-turn, ...)."""
    import llama_cpp

    vocab = llama_cpp.llama_model_get_vocab(llm.model)
    return tuple(i for i in range(llm.n_vocab()) if llama_cpp.llama_vocab_is_eog(vocab, i))


@lru_cache(maxsize=2)
def _ll_tokenizer(llm: Any) -> Any:
    """llguidance's view of ``llm``'s vocabulary with its end-of-generation ids as eos (~1 s once)."""
    import llama_cpp
    from llguidance.llamacpp import lltokenizer_from_vocab

    with warnings.catch_warnings():  # llguidance calls the deprecated llama_token_get_attr once a token
        warnings.simplefilter("ignore", DeprecationWarning)
        return lltokenizer_from_vocab(llama_cpp.llama_model_get_vocab(llm.model), eos_token=list(stop_ids(llm)))


class LlamaCppConstraint:
    """A llama-cpp-python logits processor for one ``llm.generate`` call: ``(input_ids (T,),
    logits (V,))`` numpy in, the logits with every token the grammar forbids at -inf out.
    ``accepted``: the grammar reached its end."""

    def __init__(self, llm: Any, constraint: Constraint) -> None:
        ll_tokenizer = _ll_tokenizer(llm)
        self.rows = JsonConstraintProcessor(compiled(ll_tokenizer, constraint), stop_ids(llm), ll_tokenizer.vocab_size)

    def __call__(self, input_ids: Any, logits: Any) -> Any:
        import numpy as np

        self.rows.advance([int(input_ids[-1])])
        return np.where(self.rows.allowed(logits.shape[0])[0], logits, np.float32(-np.inf))

    @property
    def accepted(self) -> bool:
        """True when the answer is the whole prefix + JSON + suffix."""
        return self.rows.accepted
