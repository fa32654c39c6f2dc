"""Load a ``ModelChoice`` for inference: its base (hub, local folder or bundled default, as training
loads it), its adapter or full weights, and the tokenizer training saved beside them.

Device and dtype as training chooses them (``compute_dtype``: bf16 on a bf16 GPU or on a CPU whose
bf16 units measure faster, e.g. 26 against 17 tokens/s for SmolLM2 on an AVX512-BF16 CPU; fp32 elsewhere),
the attention transformers picks for the architecture (SDPA where it has one; the per-row
``sdpa_varlen`` attention of training is for packed batches only). A
QLoRA adapter is applied to the base in full precision. One set of base weights per LoRA choice:
tuned answers come from those weights with the adapter merged in (``set_merged``; in fp32 only:
merging into bf16 weights and back would round the base weights a little on every switch, so a bf16
model runs its adapter unmerged), its base model's answers from the same weights unmerged, with the
adapter disabled (``weights``);
a full fine-tune's base is loaded as a second model, on first use only.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

from trainer_core.model_kind import ModelKind, kind_for_folder, kind_of
from trainer_core.serving.schemas import ModelChoice

log = logging.getLogger(__name__)


@dataclass
class LoadedModel:
    """A loaded choice. ``model`` is a ``PeftModel`` for adapters; ``context_tokens`` is the longest
    prompt + answer the model takes (``max_position_embeddings``)."""

    choice: ModelChoice
    model: Any
    tokenizer: Any
    device: str
    models_dir: Path
    context_tokens: int
    load_seconds: float
    # "base": a full fine-tune's base; "stops": stop ids; "processor": the model kind's processor (images)
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def kind(self) -> ModelKind:
        """The model's kind (``model_kind.kind_of`` its config; the text LM where it has none)."""
        return kind_of(getattr(self.model, "config", None))

    @contextlib.contextmanager
    def weights(self, use_adapter: bool = True) -> Iterator[Any]:
        """The model to generate with: the tuned one, or (``use_adapter=False``) its base: the same
        weights with the adapter disabled (LoRA), or the base loaded beside it (full fine-tune).
        ``use_adapter`` is ignored for the base choice."""
        if use_adapter or self.choice.kind == "base":
            if self.choice.adapter:
                set_merged(self.model, str(self.model.dtype) == "torch.float32")
            yield self.model
        elif self.choice.adapter:
            set_merged(self.model, False)
            with self.model.disable_adapter():
                yield self.model
        else:
            if "base" not in self.extra:
                self.extra["base"] = _load_causal_lm(_base_path(self.choice.base_model, self.models_dir), self.device)
            yield self.extra["base"]


def set_merged(model: Any, merged: bool) -> None:
    """Have the LoRA weights of ``model`` (a ``PeftModel``) merged into its base weights (tuned
    answers: each adapted layer then costs one matmul, as the base's does) or not (the base's
    answers, with the adapter disabled). PEFT's ``merge_adapter`` / ``unmerge_adapter``, done only
    on a change (each walks the adapted layers once: milliseconds for SmolLM2). Measured here
    (SmolLM2-135M, fp32, 64 greedy tokens): base 15.6 tokens/s, LoRA unmerged 12.5, merged 15.0.
    An adapter PEFT cannot merge (e.g. on 3-D expert parameters) stays unmerged: slower, same answers."""
    from peft.tuners.tuners_utils import BaseTunerLayer

    if getattr(model, "_unmergeable", False):
        return
    now = any(getattr(m, "merged", False) for m in model.modules() if isinstance(m, BaseTunerLayer))
    if now == merged:
        return
    try:
        model.merge_adapter() if merged else model.unmerge_adapter()
    except (ValueError, NotImplementedError, RuntimeError, AttributeError, TypeError) as exc:
        log.warning("the adapter stays unmerged for inference (%s: %s)", type(exc).__name__, exc)
        model._unmergeable = True
        if now or merged:
            model.unmerge_adapter()  # never leave it half merged


def _base_path(name: str, models_dir: Path) -> Path:
    from trainer_core.models import loading

    return loading.resolve_model_path(name, None, models_dir)


def _load_causal_lm(path: Path, device: str) -> Any:
    """A causal LM (in its kind's auto class: an image-text-to-text model for a vision-language
    config) from ``path`` on ``device`` in eval mode. Raises ModelLoadError."""
    from trainer_core.models.loading import ModelLoadError, compute_dtype, remote_code

    own_code = remote_code(path)  # a model that ships code loads only where the server allows it
    auto_class = kind_for_folder(path).model_class()
    try:
        # transformers' own choice: sdpa where the architecture has it, else eager (Gemma 2, gpt-oss)
        model = auto_class.from_pretrained(path, dtype=compute_dtype(device), **own_code)
    except (OSError, ValueError, ImportError) as exc:
        raise ModelLoadError(f"could not load model from {path}: {exc}") from exc
    return model.to(device).eval()


def _tokenizer_folder(choice: ModelChoice, base: Optional[Path]) -> Path:
    """Where the tokenizer (with the chat template training used) is: the weights folder, its run
    folder (for a checkpoint without one), else the base model's folder."""
    for folder in [Path(choice.path), Path(choice.path).parent] if choice.path else []:
        if (folder / "tokenizer_config.json").is_file():
            return folder
    return base if base is not None else Path(choice.path)


def load_choice(choice: ModelChoice, models_dir: Path, device: Optional[str] = None) -> LoadedModel:
    """Load ``choice`` (see the module docstring). Raises ModelLoadError naming what failed."""
    from trainer_core.models import loading

    began = time.monotonic()
    device = device or loading.pick_device()
    base = None if (choice.path and not choice.adapter) else _base_path(choice.base_model, models_dir)
    if choice.adapter:
        from peft import PeftModel

        model = _load_causal_lm(base, device)
        try:
            model = PeftModel.from_pretrained(model, choice.path, is_trainable=False).eval()
        except (OSError, ValueError, KeyError, RuntimeError) as exc:
            raise loading.ModelLoadError(f"could not load the adapter in {choice.path}: {exc}") from exc
    else:
        model = _load_causal_lm(Path(choice.path) if choice.path else base, device)
    folder = _tokenizer_folder(choice, base)
    extra: dict[str, Any] = {}
    kind = kind_for_folder(Path(choice.path) if choice.path and not choice.adapter else base)
    processor = kind.load_processor(folder, **loading.remote_code(folder))
    if processor is not None:  # e.g. a vision-language model's: images + tokenizer
        extra["processor"] = processor
        tokenizer = processor.tokenizer
    else:
        tokenizer = loading.load_tokenizer(folder, **loading.remote_code(folder))
    text_config = getattr(model.config, "text_config", None) or model.config
    context = int(getattr(text_config, "max_position_embeddings", 0) or 0) or 2048
    seconds = time.monotonic() - began
    log.info("loaded %s (%s) on %s in %.1f s", choice.id, choice.base_model, device, seconds)
    return LoadedModel(choice, model, tokenizer, device, Path(models_dir), context, seconds, extra)


PROCESSOR_FILES = ("processor_config.json", "preprocessor_config.json")  # a folder with its own processor


def load_choice_weights(choice: ModelChoice, models_dir: Path, model_class: Any, what: str) -> tuple[Any, Path, Path]:
    """(the model of ``choice`` loaded with ``model_class``: its base, a whole model folder, or a
    LoRA adapter on its base as a ``PeftModel``; the base model's folder; the folder its processor
    comes from: the choice's own where it holds ``PROCESSOR_FILES``, else the base's). For the kinds
    whose models are not causal LMs (speech-to-text, text-to-speech). Raises ModelLoadError naming
    ``what`` (e.g. "speech-to-text model") and the choice."""
    from trainer_core.models.loading import ModelLoadError, resolve_model_path

    base = resolve_model_path(choice.base_model, None, models_dir)
    folder = Path(choice.path) if choice.path else None
    try:
        if folder is None or choice.adapter:
            model = model_class.from_pretrained(base)
            if folder is not None:
                from peft import PeftModel

                model = PeftModel.from_pretrained(model, str(folder))
        else:
            model = model_class.from_pretrained(folder)
    except (OSError, ValueError, KeyError, RuntimeError) as exc:
        raise ModelLoadError(f"could not load the {what} {choice.id}: {exc}") from exc
    own = folder is not None and any((folder / name).is_file() for name in PROCESSOR_FILES)
    return model, base, folder if own else base
