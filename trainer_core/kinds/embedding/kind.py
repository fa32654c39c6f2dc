"""The text-embedding kind (``EMBEDDING``): each ``ModelKind`` method answered by this folder's
modules, imported when first used (listing models must import neither torch nor transformers)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Optional

from trainer_core.model_kind import ModelKind

MODULES = "modules.json"  # as ``loading.MODULES``; kept here so that detection imports nothing heavy


class EmbeddingKind(ModelKind):
    """A text-embedding model: a sentence-transformers folder (``modules.json``), or any causal LM
    a request trains as an embedder (``is_embedding``: last-token pooling, see ``loading``)."""

    name = "embedding"
    label = "text embedding"
    suggestion = "an embedding model (a sentence-transformers folder, or a text model with is_embedding)"
    auto_class = "AutoModel"
    serves = "embeddings"
    evaluating = "evaluating held-out retrieval"  # the IR evaluator (and the held-out loss)

    def claims_folder(self, folder: Path) -> bool:
        return (Path(folder) / MODULES).is_file()

    def claims_request(self, request: Any) -> bool:
        return getattr(request, "is_embedding", None) is True

    def family(self, config: Any) -> Optional[str]:
        return None  # config.json alone never says "embedding": the folder (modules.json) or the request does

    def gguf_problem(self, config: dict, converter: Path) -> Optional[str]:
        from trainer_core.kinds.embedding.gguf import architecture_problem

        return architecture_problem(config, converter)

    def exporter(self, fmt: str) -> Any:
        if fmt in ("adapter", "merged"):
            from trainer_core.kinds.embedding import export

            return export.export_adapter if fmt == "adapter" else export.export_merged
        from trainer_core.kinds.embedding.gguf import export_gguf

        return export_gguf

    def evaluation(self) -> Any:
        from trainer_core.kinds.embedding.evaluation import EmbeddingEvaluation

        return EmbeddingEvaluation()

    def load_server(self, choice: Any, models_dir: Path) -> Any:
        from trainer_core.kinds.embedding.serve import EmbeddingServer

        return EmbeddingServer(choice, models_dir)

    def load_processor(self, path: Path, **kwargs: Any) -> Any:
        from transformers import AutoTokenizer

        return AutoTokenizer.from_pretrained(str(path), **kwargs)  # counts the texts' tokens; the model has its own

    def load_model(self, path: Path, request: Any, device: str) -> Any:
        from trainer_core.kinds.embedding.trainer import load_embedding_model

        return load_embedding_model(path, request, device)

    def inner_model(self, model: Any) -> Any:
        return model[0].model

    def preview_rows(self, dataset: Any, request: Any, tokenizer: Any, source: str, base: Optional[Path] = None) -> Any:
        from trainer_core.kinds.embedding.preview import preview_rows

        return preview_rows(dataset, request, tokenizer, source)

    def prepare_data(self, request: Any, processor: Any) -> Any:
        from trainer_core.kinds.embedding.data import prepare_embedding_data

        return prepare_embedding_data(request, processor)

    def data_note(self, family: Optional[str], data: Any) -> tuple[str, dict]:
        stats = data.stats
        details = {
            "embedding_shape": data.format.value,
            "columns": list(data.train.column_names),
            "duplicate_anchors": stats.duplicate_anchors,
            "duplicate_positives": stats.duplicate_positives,
        }
        return f"; {data.format.value} ({', '.join(data.train.column_names)})", details

    def check_report(self, request: Any, folder: Optional[Path], tokenizer: Any, started: float) -> Any:
        from trainer_core.kinds.embedding.check import embedding_report

        return embedding_report(request, folder, tokenizer, started)

    def build_trainer(
        self,
        request: Any,
        model: Any,
        data: Any,
        output_dir: Path,
        device: str,
        callbacks: list[Any],
        run_name: Optional[str] = None,
    ) -> Any:
        from trainer_core.kinds.embedding.trainer import build_embedding_trainer

        return build_embedding_trainer(request, model, data, output_dir, device, callbacks, run_name)


EMBEDDING = EmbeddingKind()
