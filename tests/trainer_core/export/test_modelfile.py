"""Ollama's Modelfile beside each GGUF: its TEMPLATE (Go text/template) renders a 3-turn chat with a
system message to the same text as the run's tokenizer. The Go template is rendered here by
``render_go``, an interpreter of the part of Go's text/template that the TEMPLATE uses (range,
if / else if with eq, end, field access, string literals; no whitespace trimming), following
https://pkg.go.dev/text/template."""

from __future__ import annotations

import copy
import re

import pytest
from transformers import AutoTokenizer

from trainer_core.export.modelfile import modelfile, split_turns, trained_system

ACTION = re.compile(r"\{\{(.*?)\}\}", re.S)
CHAT = [
    {"role": "system", "content": "You are terse."},
    {"role": "user", "content": "Capital of France?"},
    {"role": "assistant", "content": "Paris."},
    {"role": "user", "content": "And Italy?"},
]
LLAMA3 = (
    "{{ bos_token }}{% for message in messages %}<|start_header_id|>{{ message['role'] }}<|end_header_id|>\n\n"
    "{{ message['content'] | trim }}<|eot_id|>{% endfor %}"
    "{% if add_generation_prompt %}<|start_header_id|>assistant<|end_header_id|>\n\n{% endif %}"
)
GEMMA = (
    "{% if messages[0]['role'] == 'system' %}{% set first = messages[0]['content'] + '\n\n' %}{% set rest = messages[1:] %}"
    "{% else %}{% set first = '' %}{% set rest = messages %}{% endif %}"
    "{% for message in rest %}<start_of_turn>{{ 'model' if message['role'] == 'assistant' else message['role'] }}\n"
    "{{ (first if loop.first else '') + message['content'] }}<end_of_turn>\n{% endfor %}"
    "{% if add_generation_prompt %}<start_of_turn>model\n{% endif %}"
)


def render_go(template: str, messages: list[dict]) -> str:
    """Go text/template semantics for the constructs above (``.Messages`` items have ``.Role``
    and ``.Content``)."""
    tokens, at = [], 0
    for match in ACTION.finditer(template):
        tokens.append(("text", template[at : match.start()]))
        tokens.append(("action", match.group(1).strip()))
        at = match.end()
    tokens.append(("text", template[at:]))

    def block(i: int, item: dict | None) -> tuple[str, int, str]:
        """Render from token i until an ``end`` / ``else ...`` at this level: (text, next i, stopper)."""
        out = []
        while i < len(tokens):
            kind, value = tokens[i]
            if kind == "text":
                out.append(value)
                i += 1
            elif value == "end" or value.startswith("else"):
                return "".join(out), i, value
            elif value == "range .Messages":
                start = i + 1
                for message in messages:
                    text, i, _ = block(start, message)
                    out.append(text)
                if not messages:
                    _, i, _ = block(start, None)
                i += 1
            elif value.startswith("if "):
                taken, i = False, i
                condition = value[3:]
                while True:
                    chosen = not taken and _holds(condition, item)
                    text, i, stopper = block(i + 1, item)
                    if chosen:
                        out.append(text)
                        taken = True
                    if stopper == "end":
                        i += 1
                        break
                    condition = stopper[len("else if ") :] if stopper.startswith("else if ") else "true"
            elif value == ".Content":
                out.append(item["content"])
                i += 1
            elif value.startswith('"'):
                out.append(value.strip('"'))
                i += 1
            else:
                raise AssertionError(f"unexpected action {value!r}")
        return "".join(out), i, ""

    return block(0, None)[0]


def _holds(condition: str, item: dict | None) -> bool:
    if condition == "true":
        return True
    match = re.fullmatch(r'eq \.Role "(\w+)"', condition)
    assert match, condition
    return item is not None and item["role"] == match.group(1)


def _template(text: str) -> str:
    return re.search(r'^TEMPLATE """(.*?)"""$', text, re.S | re.M).group(1)


@pytest.fixture()
def tokenizer(tiny_model_dir):
    return AutoTokenizer.from_pretrained(tiny_model_dir)


def test_chatml_translates_with_its_default_system_message_and_stop(tokenizer):
    text = modelfile("run-q4_k_m.gguf", tokenizer)
    assert text.startswith("# Ollama: ollama create NAME -f run-q4_k_m.Modelfile\nFROM ./run-q4_k_m.gguf\n")
    want = tokenizer.apply_chat_template(CHAT, tokenize=False, add_generation_prompt=True)
    assert render_go(_template(text), CHAT) == want
    assert 'PARAMETER stop "<|im_end|>"' in text
    # SmolLM2's template adds this system message to a chat without one; Ollama adds SYSTEM likewise
    system = re.search(r'^SYSTEM """(.*)"""$', text, re.M).group(1)
    assert system == "You are a helpful AI assistant named SmolLM, trained by Hugging Face"
    without = tokenizer.apply_chat_template(CHAT[1:], tokenize=False, add_generation_prompt=True)
    assert render_go(_template(text), [{"role": "system", "content": system}, *CHAT[1:]]) == without


def test_a_llama_3_template_translates_and_a_folded_gemma_one_is_left_to_the_gguf(tokenizer):
    llama = copy.deepcopy(tokenizer)
    llama.chat_template = LLAMA3
    text = modelfile("m.gguf", llama)
    want = llama.apply_chat_template(CHAT, tokenize=False, add_generation_prompt=True)
    assert render_go(_template(text), CHAT) == want  # BOS is the tokenizer's <|im_start|> here: kept
    assert "SYSTEM" not in text  # the template adds no system message of its own
    gemma = copy.deepcopy(tokenizer)
    gemma.chat_template = GEMMA
    assert split_turns(gemma) is None
    text = modelfile("m.gguf", gemma)
    assert "TEMPLATE" in text and 'TEMPLATE """' not in text and "Ollama uses the one in the GGUF" in text


def test_system_is_the_one_the_run_was_trained_with(tokenizer, tmp_path):
    """Every training row's system message (``run.json``'s ``system_message``, written by
    ``data.system_message.shared_system_message``) is the SYSTEM; a checkpoint reads its run's."""
    import json

    import datasets

    from trainer_core.data.system_message import shared_system_message

    rows = [
        [{"role": "system", "content": "You are Ada, made by Lab."}, {"role": "user", "content": f"q{i}"}]
        for i in range(3)
    ]
    assert shared_system_message(datasets.Dataset.from_dict({"messages": rows})) == "You are Ada, made by Lab."
    mixed = [*rows, [{"role": "user", "content": "no system"}]]
    assert shared_system_message(datasets.Dataset.from_dict({"messages": mixed})) is None
    other = [*rows, [{"role": "system", "content": "Another."}, {"role": "user", "content": "q"}]]
    assert shared_system_message(datasets.Dataset.from_dict({"messages": other})) is None
    assert shared_system_message(datasets.Dataset.from_dict({"text": ["raw"]})) is None
    run = tmp_path / "job_1"
    (run / "checkpoint-4").mkdir(parents=True)
    assert trained_system(run) is None  # an older run without the key: the template's default stays
    (run / "run.json").write_text(json.dumps({"system_message": "You are Ada, made by Lab."}))
    assert trained_system(run) == trained_system(run / "checkpoint-4") == "You are Ada, made by Lab."
    text = modelfile("m.gguf", tokenizer, trained_system(run))
    assert re.findall(r'^SYSTEM """(.*)"""$', text, re.M) == ["You are Ada, made by Lab."]
    assert '# SYSTEM: the system message holds """' in modelfile("m.gguf", tokenizer, 'Say """hi"""')


def test_a_template_holding_triple_quotes_is_left_to_the_gguf(tokenizer):
    """Three double quotes would end TEMPLATE early and let the rest read as directives."""
    quoted = copy.deepcopy(tokenizer)
    quoted.chat_template = tokenizer.chat_template.replace("<|im_start|>", '"""<|im_start|>')
    text = modelfile("m.gguf", quoted)
    assert 'TEMPLATE """' not in text and '# TEMPLATE: the chat template holds """' in text
    assert all(line.startswith(("#", "FROM", "PARAMETER", "SYSTEM")) for line in text.splitlines())
