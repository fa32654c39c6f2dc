"""Embeddings in the inference worker (``EMBEDDING.load_server``): one embedding model loaded with
``loading.load_embedder`` (a run's folder, adapter or whole; a merged export; the base model, a
sentence-transformers folder or a causal LM with the last-token head), answering embeddings
commands until the worker is told to exit.

A command's request: ``{"input": [str, ...], "dimensions": int | None, "use_adapter": bool}``;
its answer, the ``done`` event's payload: ``{"vectors": float32 array (N, D), "prompt_tokens": int}``.
Vectors are unit length, as OpenAI's are; ``dimensions`` keeps the first values of each and
re-normalises them (a Matryoshka model's smaller embedding). ``use_adapter=False``: the run's base
model answers (a LoRA run: the same weights with the adapter disabled; a full fine-tune: its base
loaded beside it on first use), for the search playground's tuned-beside-base ranking.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Optional

import numpy as np

from trainer_core.kinds.embedding.loading import EmbedderLoadError, embedder_of, load_embedder
from trainer_core.serving.errors import ChatInputError
from trainer_core.serving.schemas import ModelChoice

log = logging.getLogger(__name__)
BATCH_SIZE = 32  # texts encoded at once


class EmbeddingServer:
    """A loaded embedding ``choice`` on ``device``; ``answer`` serves one request (see the module
    docstring). Raises ModelLoadError when the model cannot be loaded."""

    def __init__(self, choice: ModelChoice, models_dir: Path, device: Optional[str] = None) -> None:
        from trainer_core.models import loading

        began = time.monotonic()
        self.choice, self.device = choice, device or loading.pick_device()
        self._base_path: Optional[Path] = None
        if choice.path is None or choice.adapter:
            self._base_path = loading.resolve_model_path(choice.base_model, None, models_dir)
        try:
            if choice.path is None:
                self.model = embedder_of(self._base_path, self.device)
            else:
                self.model = load_embedder(Path(choice.path), self.device, base=self._base_path)
        except (EmbedderLoadError, OSError, ValueError) as exc:
            raise loading.ModelLoadError(f"could not load the embedding model {choice.id}: {exc}") from exc
        self.model.eval()
        self._models_dir, self._base_model = models_dir, None
        self.load_seconds = time.monotonic() - began
        log.info("embedding model %s loaded on %s in %.1f s", choice.id, self.device, self.load_seconds)

    @property
    def dimensions(self) -> int:
        """The length of the model's own vectors."""
        return int(self.model.get_embedding_dimension())

    def answer(self, request: dict[str, Any]) -> dict[str, Any]:
        """The vectors of ``request["input"]`` (see the module docstring). Raises ChatInputError
        naming ``dimensions`` when it is above the model's size, or for a chat request."""
        if "input" not in request:
            raise ChatInputError(
                f"{self.choice.id} is an embedding model: it answers embeddings (POST /v1/embeddings), not chat",
                fields=("model",),
                code="embedding_model",
            )
        texts, dimensions = list(request["input"]), request.get("dimensions")
        if dimensions is not None and not 1 <= dimensions <= self.dimensions:
            raise ChatInputError(
                f"dimensions: {self.choice.id} makes vectors of {self.dimensions} values; ask for 1 to "
                f"{self.dimensions} (or leave dimensions out)",
                fields=("dimensions",),
                code="dimensions_too_large",
            )
        with self.weights(request.get("use_adapter", True)) as model:
            vectors = model.encode(texts, batch_size=BATCH_SIZE, convert_to_numpy=True)  # (N, D)
            tokens = int(model.tokenize(texts)["attention_mask"].sum()) if texts else 0
        if not np.isfinite(vectors).all():  # JSON cannot carry them, and no search can use them
            raise ChatInputError(
                f"{self.choice.id} makes vectors with NaN or infinite values: its weights are broken (e.g. a run "
                "that diverged); embed with another run or its base",
                fields=("model",),
                code="vectors_not_finite",
            )
        return {"vectors": unit_rows(vectors, dimensions), "prompt_tokens": tokens}

    @contextlib.contextmanager
    def weights(self, use_adapter: bool) -> Iterator[Any]:
        """The tuned model, or (``use_adapter=False``) its base (ignored for the base choice)."""
        import torch

        body = self.model[0].model
        with torch.inference_mode():
            if use_adapter or self.choice.kind == "base":
                yield self.model
            elif self.choice.adapter:
                with body.disable_adapter():
                    yield self.model
            else:
                if self._base_model is None:
                    from trainer_core.models import loading

                    base = loading.resolve_model_path(self.choice.base_model, None, self._models_dir)
                    self._base_model = embedder_of(base, self.device).eval()
                yield self._base_model


def unit_rows(vectors: Any, dimensions: Optional[int] = None) -> Any:
    """``vectors`` (N, D) as float32, cut to their first ``dimensions`` values (None: all) and each
    row scaled to unit length (a zero row stays zero)."""
    import numpy as np

    cut = np.asarray(vectors, dtype=np.float32)[:, :dimensions]
    norms = np.linalg.norm(cut, axis=1, keepdims=True)
    return cut / np.where(norms > 0, norms, 1.0)
