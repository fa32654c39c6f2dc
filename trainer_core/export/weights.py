"""Load a run's weights for export, merge an adapter, and save a whole model folder.

The reference (the run as trained) is always float32: the base model in float32 with the PEFT
adapter on top (a QLoRA adapter too: it is applied to the unquantized base, as chat does), or a
full fine-tune's own weights. Merging uses ``merge_and_unload()``; a QLoRA run's adapter was
trained on a 4-bit (NF4) base and is merged into the base loaded unquantized in 16-bit
(``QLORA_MERGE_DTYPE``), as the issue asks. Saved folders hold safetensors weights, the tokenizer
with its chat template (``chat_template.jinja``) and a ``generation_config.json`` whose
``eos_token_id`` lists the tokenizer's eos and the end-of-turn token the chat template uses.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

from trainer_core.serving.schemas import ModelChoice

log = logging.getLogger(__name__)
SMALL_MODEL_PARAMS = 1_000_000_000  # below this, CPU work on the model runs on one thread (small_model_threads)
QLORA_MERGE_DTYPE = {"bfloat16": "bfloat16", "float16": "float16", "float32": "float16"}  # export dtype -> merge dtype
TOKENIZER_FILES = (
    "tokenizer.json",
    "tokenizer_config.json",
    "chat_template.jinja",
    "special_tokens_map.json",
    "tokenizer.model",
    "vocab.json",
    "merges.txt",
    "added_tokens.json",
)


@dataclass
class RunWeights:
    """The loaded run: ``model`` (PeftModel for an adapter, else the full model; float32, eval
    mode), its ``tokenizer``, the base model's folder (None for a full fine-tune), whether the
    run is QLoRA and, for a vision-language model, its ``processor``."""

    choice: ModelChoice
    model: Any
    tokenizer: Any
    tokenizer_dir: Path
    base_dir: Optional[Path]
    qlora: bool
    processor: Any = None  # a vision-language model's processor (saved with the merged model)


@contextlib.contextmanager
def small_model_threads(model: Any) -> Iterator[None]:
    """Run the block on one CPU thread when ``model`` is small (< ``SMALL_MODEL_PARAMS``) and on the
    CPU. Its steps (one-token decoding, 210 rank-16 LoRA merges) are tiny matmuls, bound by thread
    synchronisation: measured here for the check's 60 greedy tokens of SmolLM2-135M + LoRA, 4.7 s
    on one thread vs 36-49 s on both cores while another process kept one core busy."""
    import torch

    first = next(model.parameters(), None)
    small = (
        first is not None
        and first.device.type == "cpu"
        and sum(p.numel() for p in model.parameters()) < SMALL_MODEL_PARAMS
    )
    before = torch.get_num_threads()
    if small:
        torch.set_num_threads(1)
    try:
        yield
    finally:
        if small:
            torch.set_num_threads(before)


def torch_dtype(name: str) -> Any:
    """``"float16"`` -> ``torch.float16`` (``schemas.MergeDtype``, or float32)."""
    import torch

    return {"float16": torch.float16, "bfloat16": torch.bfloat16, "float32": torch.float32}[name]


def base_dir(choice: ModelChoice, models_dir: Path) -> Path:
    """The base model's local folder (Hub cache, local folder or the materialized default model).
    Raises ModelLoadError."""
    from trainer_core.models.loading import resolve_model_path

    return resolve_model_path(choice.base_model, None, Path(models_dir))


def load_causal_lm(path: Path, dtype: str = "float32", **kwargs: Any) -> Any:
    """A causal LM from ``path`` in ``dtype`` on the CPU, in eval mode (``kwargs`` go to
    ``from_pretrained``, e.g. ``gguf_file``); the class of the folder's model kind
    (``ModelKind.model_class``: an image-text-to-text model for a vision-language folder). Raises
    ModelLoadError naming the folder."""
    from trainer_core.model_kind import kind_for_folder
    from trainer_core.models.loading import ModelLoadError, remote_code

    kind = kind_for_folder(None if "gguf_file" in kwargs else Path(path))  # a GGUF file: the text LM
    kwargs = {**remote_code(path), **kwargs}  # a model that ships code loads only where the server allows it
    try:
        # transformers' own choice: sdpa where the architecture has it, else eager (Gemma 2, gpt-oss)
        auto_class = kind.model_class()
        model = auto_class.from_pretrained(path, dtype=torch_dtype(dtype), **kwargs)
    except (OSError, ValueError, ImportError, KeyError, RuntimeError) as exc:
        raise ModelLoadError(f"could not load the model from {path}: {exc}") from exc
    return model.eval()


def load_run(choice: ModelChoice, models_dir: Path, qlora: bool = False) -> RunWeights:
    """The run as trained, in float32 (see the module docstring). Raises ModelLoadError."""
    from trainer_core.model_kind import kind_for_folder
    from trainer_core.models.loading import ModelLoadError, load_tokenizer, remote_code
    from trainer_core.serving.loader import _tokenizer_folder  # where chat finds the run's tokenizer too

    base = base_dir(choice, models_dir) if choice.adapter else None
    if choice.adapter:
        from peft import PeftModel

        model = load_causal_lm(base)
        try:
            model = PeftModel.from_pretrained(model, choice.path, is_trainable=False).eval()
        except (OSError, ValueError, KeyError, RuntimeError) as exc:
            raise ModelLoadError(f"could not load the adapter in {choice.path}: {exc}") from exc
    else:
        model = load_causal_lm(Path(choice.path))
    folder = _tokenizer_folder(choice, base)
    processor = kind_for_folder(base if choice.adapter else Path(choice.path)).load_processor(
        folder, **remote_code(folder)
    )
    if processor is not None:  # e.g. a vision-language model's: images + tokenizer
        return RunWeights(choice, model, processor.tokenizer, folder, base, qlora, processor)
    return RunWeights(choice, model, load_tokenizer(folder, **remote_code(folder)), folder, base, qlora)


def merge(run: RunWeights, dtype: str) -> tuple[Any, list[str]]:
    """The whole model in ``dtype`` and notes for the card. LoRA: ``merge_and_unload()`` of the
    float32 reference, in place (``run.model`` is used up). QLoRA: the adapter merged into a fresh
    16-bit copy of the base (``run.model`` is kept). Full fine-tune: the model itself."""
    notes: list[str] = []
    if run.qlora and run.choice.adapter:
        from peft import PeftModel

        merge_dtype = QLORA_MERGE_DTYPE.get(dtype, "float16")
        base = load_causal_lm(run.base_dir, merge_dtype)
        model = PeftModel.from_pretrained(base, run.choice.path, is_trainable=False).merge_and_unload()
        notes.append(
            f"QLoRA run: the adapter was trained on the base quantized to 4-bit (NF4); it is merged into "
            f"the base loaded unquantized in {merge_dtype}, so answers can differ slightly from the 4-bit model's."
        )
    elif run.choice.adapter:
        with small_model_threads(run.model):
            model = run.model.merge_and_unload()
    else:
        model = run.model
        notes.append("Full fine-tune: the model's own weights, re-saved.")
    return model.to(torch_dtype(dtype)), notes


def stop_ids(tokenizer: Any) -> list[int]:
    """The eos id plus each end-of-turn token (``serving.generate.END_OF_TURN``) that the chat
    template writes, e.g. ``<|im_end|>`` for ChatML; sorted, no duplicates."""
    from trainer_core.serving.generate import END_OF_TURN

    ids = {tokenizer.eos_token_id} if tokenizer.eos_token_id is not None else set()
    template = tokenizer.chat_template if isinstance(tokenizer.chat_template, str) else ""
    vocab = tokenizer.get_vocab()
    ids.update(vocab[token] for token in END_OF_TURN if token in vocab and token in template)
    return sorted(ids)


def save_model(model: Any, tokenizer: Any, folder: Path, processor: Any = None) -> None:
    """Write ``model`` (safetensors), ``tokenizer`` (with its chat template) and a generation config
    that stops at ``stop_ids`` into ``folder`` (created); a vision-language model's ``processor``
    too (its image processor settings: the folder then loads with ``AutoProcessor``)."""
    folder.mkdir(parents=True, exist_ok=True)
    eos = stop_ids(tokenizer)
    config = model.generation_config
    config.eos_token_id = eos if len(eos) != 1 else eos[0]
    if config.pad_token_id is None:
        config.pad_token_id = tokenizer.pad_token_id
    if config.bos_token_id is None and tokenizer.bos_token_id is not None:
        config.bos_token_id = tokenizer.bos_token_id
    model.save_pretrained(folder)
    (processor if processor is not None else tokenizer).save_pretrained(folder)
    log.info("saved %s (%.1f MB)", folder, folder_bytes(folder) / 1e6)


def folder_bytes(folder: Path) -> int:
    """Total size in bytes of the files under ``folder``."""
    return sum(p.stat().st_size for p in Path(folder).rglob("*") if p.is_file())
