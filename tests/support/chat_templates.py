"""Real chat templates (tests/data/chat_templates: copied from llama.cpp's models/templates) put on
a copy of the bundled tokenizer, so a family's tool prompts and call format are tested offline."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

TEMPLATES = Path(__file__).resolve().parent.parent / "data" / "chat_templates"
FILES = {
    "qwen2.5": "Qwen-Qwen2.5-7B-Instruct.jinja",
    "hermes3": "NousResearch-Hermes-3-Llama-3.1-8B-tool_use.jinja",
    "llama3.1": "meta-llama-Llama-3.1-8B-Instruct.jinja",
    "mistral-nemo": "mistralai-Mistral-Nemo-Instruct-2407.jinja",
    "gpt-oss": "openai-gpt-oss-120b.jinja",
    "gemma2": "google-gemma-2-2b-it.jinja",
}


def with_template(tokenizer: Any, name: str) -> Any:
    """A copy of ``tokenizer`` whose chat template is the real template ``name`` (a key of ``FILES``)."""
    copied = copy.copy(tokenizer)
    copied.chat_template = (TEMPLATES / FILES[name]).read_text()
    return copied
