"""The export check run by llama.cpp, the program that will load the file.

What it checks (one ``probe`` process per file):

- **the chat template in the GGUF**: a 3-turn conversation with a system message
  (``CONVERSATION``), rendered from the file's own template and tokenized by llama.cpp's tokenizer,
  must give the same token ids as the run's tokenizer (``apply_chat_template``); a difference names
  the first differing position;
- **the end of a turn**: llama.cpp must treat the run's end-of-turn token (the tokenizer's EOS, what
  chat stops at) as end of generation (``llama_vocab_is_eog``), else answers run on;
- **the answers**: teacher-forced predictions and greedy answers to the check prompts, compared
  with the run as trained by ``check.RULES[type]`` (``check.compare``): near-ties only for
  f16 / bf16 / q8_0, an agreement figure for the quantised types.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any, Optional

from trainer_core.export import check as checks
from trainer_core.export.schemas import CheckResult
from trainer_core.llamacpp.client import run_probe

CONVERSATION: tuple[dict[str, str], ...] = (
    {"role": "system", "content": "You are a concise assistant."},
    {"role": "user", "content": "What is the capital of France?"},
    {"role": "assistant", "content": "Paris."},
    {"role": "user", "content": "And of Italy?"},
    {"role": "assistant", "content": "Rome."},
    {"role": "user", "content": "Thanks! One more: Spain?"},
)


def template_ids(tokenizer: Any) -> Optional[list[int]]:
    """The run's tokenizer's ids for ``CONVERSATION`` with the generation prompt; None when it has
    no chat template or the template refuses a system message."""
    if not isinstance(getattr(tokenizer, "chat_template", None), str):
        return None
    try:
        ids = tokenizer.apply_chat_template(list(CONVERSATION), tokenize=True, add_generation_prompt=True)
    except Exception:  # noqa: BLE001 - a template that refuses system messages raises its own errors
        return None
    if isinstance(ids, dict) or hasattr(ids, "input_ids"):
        ids = ids["input_ids"]
    return [int(i) for i in ids]


def llama_check(
    path: Path,
    gguf_type: str,
    ref: Any,
    tokenizer: Any,
    folder: Path,
    on_line: Callable[[str], None] = lambda line: None,
    should_stop: Callable[[], bool] = lambda: False,
) -> CheckResult:
    """Check the GGUF at ``path`` (of ``gguf_type``) in llama.cpp against ``ref``
    (``job.Reference``) and ``tokenizer``. Raises what ``client.run_probe`` raises."""
    want = template_ids(tokenizer)
    answer = run_probe(
        {
            "op": "check",
            "gguf": str(path),
            "prompts": ref.prompts,
            "answers": ref.answers.tokens,
            "messages": list(CONVERSATION),
            "end_of_turn": tokenizer.eos_token_id,
            "threads": max(1, min(4, os.cpu_count() or 1)),
        },
        folder,
        on_line,
        should_stop,
    )
    problems = []
    got = answer.get("template_ids")
    template_ok = None
    if want is not None:
        template_ok = got == want
        if got is None:
            problems.append(
                "llama.cpp finds no chat template in the GGUF: chat apps would format prompts their own way"
            )
        elif not template_ok:
            at = checks.common_prefix(want, got)
            problems.append(
                f"the GGUF's chat template, rendered and tokenized by llama.cpp, differs from the run's tokenizer "
                f"at token {at + 1} of a 3-turn chat with a system message ({len(got)} vs {len(want)} tokens)"
            )
    eog = bool(answer.get("end_of_turn_is_eog"))
    if not eog:
        problems.append(
            f"llama.cpp does not end generation at the run's end-of-turn token {tokenizer.eos_token!r}: answers "
            "would run on past the end of a turn"
        )
    result = checks.compare(
        f"{gguf_type} in llama.cpp",
        ref.answers,
        answer["free"],
        answer["forced"],
        checks.RULES[gguf_type],
        problems,
    )
    result.checked_by = "llama.cpp"
    result.chat_template_ok, result.eos_ok = template_ok, eog
    result.samples = [
        {"prompt": prompt, "adapter": tokenizer.decode(want_ids), "exported": tokenizer.decode(got_ids)}
        for prompt, want_ids, got_ids in zip(checks.CHECK_PROMPTS, ref.answers.tokens, answer["free"])
    ]
    return result
