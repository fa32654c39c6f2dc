"""Read a GGUF file's metadata (``gguf.GGUFReader``) and compare what chat depends on with the
run's tokenizer: the chat template and the BOS / EOS token ids.

A GGUF that lost its chat template or carries the wrong EOS loads fine and then answers gibberish
or never stops in llama.cpp / Ollama / LM Studio: the top complaint this check exists for.
Reading the metadata of SmolLM2-135M's file takes ~3 s here (the vocabulary arrays are parsed too).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

KEYS = {
    "architecture": "general.architecture",
    "chat_template": "tokenizer.chat_template",
    "eos": "tokenizer.ggml.eos_token_id",
    "bos": "tokenizer.ggml.bos_token_id",
    "add_bos": "tokenizer.ggml.add_bos_token",
    "file_type": "general.file_type",
    "name": "general.name",
}


@dataclass
class GgufMeta:
    """What the file says (None: the key is absent)."""

    architecture: Optional[str] = None
    chat_template: Optional[str] = None
    eos: Optional[int] = None
    bos: Optional[int] = None
    add_bos: Optional[bool] = None
    file_type: Optional[int] = None
    name: Optional[str] = None
    extra: dict[str, Any] = field(default_factory=dict)


def read_meta(path: Path) -> GgufMeta:
    """The metadata of the GGUF file at ``path``. Raises ValueError when it is not a readable GGUF."""
    from gguf import GGUFReader

    try:
        reader = GGUFReader(str(path))
    except (OSError, ValueError, IndexError, KeyError) as exc:
        raise ValueError(f"{Path(path).name} is not a readable GGUF file: {exc}") from exc
    values = {}
    for name, key in KEYS.items():
        item = reader.fields.get(key)
        values[name] = item.contents() if item is not None else None
    return GgufMeta(**values)


def file_type_name(value: Optional[int]) -> str:
    """llama.cpp's name of a ``general.file_type`` value (``gguf.LlamaFileType``): 15 ->
    ``MOSTLY_Q4_K_M``; ``""`` when absent, the number when unknown."""
    from gguf import LlamaFileType

    if value is None:
        return ""
    try:
        return LlamaFileType(int(value)).name
    except ValueError:
        return str(value)


@dataclass
class MetaCheck:
    """Outcome of comparing a GGUF's metadata with the tokenizer: each flag None when not checked."""

    chat_template_ok: Optional[bool]
    eos_ok: Optional[bool]
    bos_ok: Optional[bool]
    problems: list[str]


def compare_meta(meta: GgufMeta, tokenizer: Any) -> MetaCheck:
    """The file's chat template must equal the tokenizer's; its EOS id must be the tokenizer's eos
    (what chat stops at); its BOS id the tokenizer's bos when the tokenizer has one."""
    problems = []
    template = tokenizer.chat_template if isinstance(tokenizer.chat_template, str) else None
    template_ok = meta.chat_template == template
    if meta.chat_template is None:
        problems.append(
            "the GGUF has no chat template (tokenizer.chat_template): chat apps would format prompts "
            "differently from training"
        )
    elif not template_ok:
        problems.append("the GGUF's chat template differs from the run's tokenizer's")
    eos_ok = meta.eos == tokenizer.eos_token_id
    if not eos_ok:
        problems.append(
            f"the GGUF's EOS token id is {meta.eos} ({_token(tokenizer, meta.eos)}), the tokenizer's is "
            f"{tokenizer.eos_token_id} ({tokenizer.eos_token}): answers would not stop at the end of a turn"
        )
    bos_ok = None
    if tokenizer.bos_token_id is not None:
        bos_ok = meta.bos == tokenizer.bos_token_id
        if not bos_ok:
            problems.append(f"the GGUF's BOS token id is {meta.bos}, the tokenizer's is {tokenizer.bos_token_id}")
    return MetaCheck(template_ok, eos_ok, bos_ok, problems)


def _token(tokenizer: Any, token_id: Optional[int]) -> str:
    if token_id is None:
        return "missing"
    try:
        return repr(tokenizer.convert_ids_to_tokens(int(token_id)))
    except (ValueError, IndexError, TypeError, OverflowError):
        return "not in the vocabulary"
