"""One way to load, save and reload an embedding model (``sentence_transformers.SentenceTransformer``).

- A sentence-transformers folder (``modules.json``: its transformer, pooling and normalize modules)
  loads as it is.
- A causal LM's folder used as an embedder (``is_embedding``) gets Qwen3-Embedding's head: the
  model's last hidden state, last-token pooling with left padding, then normalize.
- A LoRA run's folder holds the sentence-transformers module files and PEFT's adapter
  (``adapter_config.json``, ``adapter_model.safetensors``) but not the base weights; its base is
  ``adapter_config.json``'s ``base_model_name_or_path``. The adapter is attached with PEFT itself:
  transformers 5's own adapter loading (which ``SentenceTransformer(path)`` uses) needs PEFT 0.22,
  newer than the pinned one, and without it would load the base model's random head silently.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Optional

MODULES = "modules.json"
ADAPTER_CONFIG = "adapter_config.json"
# The decoder head reads plain text: sentence-transformers 6 gives a tokenizer with a chat template a
# "message" modality too and renders each string through the template (SmolLM2's adds its system
# prompt), which no embedding user (nor llama.cpp's embed) does.
TEXT_ONLY = {"text": {"method": "forward", "method_output_name": "last_hidden_state"}}
MAX_SEQ_LENGTH = 512  # the decoder head's default; sentence-transformers folders keep their own


class EmbedderLoadError(ValueError):
    """The folder is not an embedding model this studio can load; the message names the file."""


def is_sentence_transformers_folder(folder: Optional[Path]) -> bool:
    """True when ``folder`` holds a sentence-transformers model (``modules.json``)."""
    return folder is not None and (Path(folder) / MODULES).is_file()


def _inside(path: Path, folder: Path) -> bool:
    """True when ``path`` (symlinks followed) lies in ``folder``, or, for a Hub cache snapshot
    (``models--org--name/snapshots/<rev>``), in that model's own ``blobs`` (where its links point)."""
    resolved, root = path.resolve(), folder.resolve()
    roots = [root]
    if root.parent.name == "snapshots":
        roots.append(root.parent.parent / "blobs")
    return any(resolved == r or r in resolved.parents for r in roots)


def checked_modules(folder: Path) -> list[dict]:
    """The module list of the sentence-transformers ``folder`` (``modules.json``), each module's
    folder and its files inside ``folder`` (a link out of it, or a path with ``..`` or rooted,
    refused: loading them would read files outside the allowed folders). Raises EmbedderLoadError
    naming ``modules.json`` and the module."""
    path = Path(folder) / MODULES
    try:
        modules = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise EmbedderLoadError(f"{path}: cannot be read as a module list ({exc})") from exc
    if not isinstance(modules, list) or not modules or not all(isinstance(m, dict) for m in modules):
        raise EmbedderLoadError(f"{path}: not a sentence-transformers module list (a list of modules)")
    for i, module in enumerate(modules):
        sub, kind = module.get("path"), module.get("type")
        if not isinstance(sub, str) or not isinstance(kind, str):
            raise EmbedderLoadError(f'{path}: module {i} needs a "path" and a "type" (texts)')
        place = Path(folder) / sub
        files = [p for p in place.rglob("*") if p.is_file() or p.is_symlink()] if place.is_dir() and sub else []
        if (
            Path(sub).is_absolute()
            or ".." in Path(sub).parts
            or not all(_inside(p, Path(folder)) for p in [place, *files])
        ):
            raise EmbedderLoadError(
                f"{path}: module {i} ({kind.rsplit('.', 1)[-1]}) is read from {sub!r}, outside the model's folder "
                "(a link or a path out of it): keep each module's files inside the model folder"
            )
    return modules


def adapter_base(folder: Path) -> Optional[Path]:
    """The base model folder of a LoRA run saved in ``folder`` (``adapter_config.json``'s
    ``base_model_name_or_path``), or None when ``folder`` holds whole weights. Raises
    EmbedderLoadError when the adapter's config cannot be read."""
    path = Path(folder) / ADAPTER_CONFIG
    if not path.is_file():
        return None
    try:
        base = json.loads(path.read_text(encoding="utf-8"))["base_model_name_or_path"]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise EmbedderLoadError(f"{path}: not a PEFT adapter config ({exc})") from exc
    return Path(base)


def load_embedder(folder: Path, device: str = "cpu", base: Optional[Path] = None, **kwargs: Any) -> Any:
    """The ``SentenceTransformer`` saved in ``folder`` (see the module's docstring) on ``device``.
    ``base``: the base folder of a LoRA run (default: the adapter's own record of it). ``kwargs``
    go to ``from_pretrained`` (``trust_remote_code``, ``dtype``). Raises EmbedderLoadError."""
    folder = Path(folder)
    base = base or adapter_base(folder)
    if base is None:
        return embedder_of(folder, device, **kwargs)
    from peft import PeftModel

    model = embedder_of(base, device, **kwargs)
    body = model[0]
    try:
        body.model = PeftModel.from_pretrained(body.model, str(folder), is_trainable=False)
    except (KeyError, TypeError, ValueError, RuntimeError) as exc:  # a config PEFT cannot read, weights that do not fit
        raise EmbedderLoadError(
            f"{folder / ADAPTER_CONFIG}: the adapter cannot be loaded on {base} ({exc!r:.300})"
        ) from exc
    return model


def embedder_of(path: Path, device: str = "cpu", max_seq_length: int = MAX_SEQ_LENGTH, **kwargs: Any) -> Any:
    """A ``SentenceTransformer`` of the model in ``path``: its own modules where it is a
    sentence-transformers folder, else the decoder head (last-token pooling, left padding,
    normalize). Raises EmbedderLoadError when ``path`` holds no model."""
    from sentence_transformers import SentenceTransformer

    path = Path(path)
    if not (path / "config.json").is_file() and not is_sentence_transformers_folder(path):
        raise EmbedderLoadError(f"{path}: no model here (neither {MODULES} nor config.json)")
    if is_sentence_transformers_folder(path):
        checked_modules(path)
        return SentenceTransformer(str(path), device=device, model_kwargs=kwargs or None)
    from sentence_transformers.sentence_transformer.modules import Normalize, Pooling, Transformer

    body = Transformer(
        str(path),
        max_seq_length=max_seq_length,
        model_kwargs=kwargs or None,
        processor_kwargs={"padding_side": "left"},
        modality_config=TEXT_ONLY,  # never the "message" modality: it would wrap each text in the chat template
        module_output_name="token_embeddings",
    )
    tokenizer = body.tokenizer
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    pooling = Pooling(body.get_embedding_dimension(), pooling_mode="lasttoken")
    return SentenceTransformer(modules=[body, pooling, Normalize()], device=device)


def save_embedder(model: Any, folder: Path) -> None:
    """Save ``model`` in ``folder`` so that ``load_embedder(folder)`` gives it back: whole, or (its
    transformer wrapped by PEFT) the sentence-transformers module files plus the adapter alone."""
    from peft import PeftModel

    folder = Path(folder)
    body = model[0]
    if not isinstance(body.model, PeftModel):
        model.save_pretrained(str(folder), create_model_card=False)
        return
    peft_model = body.model
    body.model = peft_model.get_base_model()
    try:
        model.save_pretrained(
            str(folder), create_model_card=False
        )  # module files, config, tokenizer (and base weights, dropped below)
    finally:
        body.model = peft_model
    for weights in (*folder.glob("model*.safetensors"), *folder.glob("model.safetensors.index.json")):
        weights.unlink()
    peft_model.save_pretrained(str(folder))  # adapter_config.json (with the base's path) + adapter weights
    (folder / "README.md").unlink(missing_ok=True)  # PEFT's blank card; an export writes the real one
