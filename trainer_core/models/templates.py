"""The chat template a model without one gets (``TrainingStartRequest.default_chat_template``).

Base models (GPT-2, Falcon, most ``*-base`` checkpoints) ship no chat template, yet conversation
data must be written as text somehow. The request names one of these Jinja templates; a model
that has its own template always keeps it. ``auto`` picks ChatML when the tokenizer knows
``<|im_start|>`` / ``<|im_end|>`` as tokens (SmolLM2, Qwen bases) and Zephyr's layout otherwise,
because Zephyr ends every turn with the tokenizer's own eos token: a model fine-tuned on it stops
where generation stops, while ChatML's ``<|im_end|>`` written as plain text pieces would never be
a stop token. Sources: ChatML (OpenAI, as in SmolLM2's and Qwen's tokenizer_config.json),
Zephyr (HuggingFaceH4/zephyr-7b-beta's template), Alpaca (tatsu-lab/stanford_alpaca's prompt).
The trained run saves its tokenizer with the template it used, so chat, serving and export
render conversations the way training did.
"""

from __future__ import annotations

import logging
from typing import Any

log = logging.getLogger(__name__)

CHATML = (
    "{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n' }}"
    "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)
ZEPHYR = (
    "{% for message in messages %}{{ '<|' + message['role'] + '|>\n' + message['content'] + eos_token + '\n' }}"
    "{% endfor %}{% if add_generation_prompt %}{{ '<|assistant|>\n' }}{% endif %}"
)
ALPACA = (
    "{% for message in messages %}{% if message['role'] == 'system' %}{{ message['content'] + '\n\n' }}"
    "{% elif message['role'] == 'user' %}{{ '### Instruction:\n' + message['content'] + '\n\n' }}"
    "{% else %}{{ '### Response:\n' + message['content'] + eos_token + '\n\n' }}{% endif %}{% endfor %}"
    "{% if add_generation_prompt %}{{ '### Response:\n' }}{% endif %}"
)
TEMPLATES = {"chatml": CHATML, "zephyr": ZEPHYR, "alpaca": ALPACA}
CHATML_TOKENS = ("<|im_start|>", "<|im_end|>")


def default_template_name(tokenizer: Any, choice: str = "auto") -> str:
    """The template name ``choice`` ("auto" or a key of ``TEMPLATES``) means for ``tokenizer``."""
    if choice != "auto":
        return choice
    vocab = tokenizer.get_vocab()
    return "chatml" if all(token in vocab for token in CHATML_TOKENS) else "zephyr"


def fill_template(tokenizer: Any, choice: str = "auto") -> str | None:
    """Give ``tokenizer`` the default template ``choice`` when it has none (in place); returns the
    name used, or None when the tokenizer keeps its own. The name is also kept on the tokenizer as
    ``studio_default_template`` for the pre-flight check to show."""
    if tokenizer.chat_template:
        return None
    name = default_template_name(tokenizer, choice)
    tokenizer.chat_template = TEMPLATES[name]
    tokenizer.studio_default_template = name
    log.info("%s has no chat template; using the default %s template", tokenizer.name_or_path, name)
    return name


def template_example(tokenizer: Any) -> str:
    """A short conversation as ``tokenizer``'s template writes it (what the check shows)."""
    messages = [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello!"}]
    return tokenizer.apply_chat_template(messages, tokenize=False)
