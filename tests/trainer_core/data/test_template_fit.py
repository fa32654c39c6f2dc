"""Chat-template quirks per family: Gemma's template refuses a system message and Mistral's (and
Gemma's) refuse repeated turns; conversations are shaped to fit instead of failing, the check says
so, chat shapes them the same way, and the answer-only mask stays on the answers (decoded)."""

from __future__ import annotations

import pytest

from trainer_core.data.template_fit import TemplateFit, fit_conversation, shaped_count, template_fit

# google/gemma-7b-it and gemma-2 (tokenizer_config.json), verbatim.
GEMMA = (
    "{{ bos_token }}{% if messages[0]['role'] == 'system' %}{{ raise_exception('System role not supported') }}"
    "{% endif %}{% for message in messages %}{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}"
    "{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}{% endif %}"
    "{% if (message['role'] == 'assistant') %}{% set role = 'model' %}{% else %}{% set role = message['role'] %}"
    "{% endif %}{{ '<start_of_turn>' + role + '\\n' + message['content'] | trim + '<end_of_turn>\\n' }}{% endfor %}"
    "{% if add_generation_prompt %}{{'<start_of_turn>model\\n'}}{% endif %}"
)
# mistralai/Mistral-7B-Instruct-v0.1 (tokenizer_config.json), verbatim.
MISTRAL = (
    "{{ bos_token }}{% for message in messages %}{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}"
    "{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}{% endif %}"
    "{% if message['role'] == 'user' %}{{ '[INST] ' + message['content'] + ' [/INST]' }}"
    "{% elif message['role'] == 'assistant' %}{{ message['content'] + eos_token}}"
    "{% else %}{{ raise_exception('Only user and assistant roles are supported!') }}{% endif %}{% endfor %}"
)
CONVERSATION = [
    {"role": "system", "content": "You are terse."},
    {"role": "user", "content": "Hi."},
    {"role": "user", "content": "Name a colour."},
    {"role": "assistant", "content": "Blue."},
    {"role": "user", "content": "Another?"},
    {"role": "assistant", "content": "Red."},
]


@pytest.fixture
def with_template(tiny_model_dir):
    """A fresh copy of the bundled tokenizer with the given chat template."""
    from trainer_core.models.loading import load_tokenizer

    def make(template: str):
        tokenizer = load_tokenizer(tiny_model_dir)
        tokenizer.chat_template = template
        return tokenizer

    return make


def test_the_templates_refusals_are_found_by_probing(with_template, tokenizer):
    assert template_fit(with_template(GEMMA)) == TemplateFit(system=True, repeats=True, tool=True)
    assert template_fit(with_template(MISTRAL)) == TemplateFit(system=True, repeats=True, tool=True)
    assert template_fit(tokenizer) == TemplateFit()  # ChatML takes anything


def test_system_text_is_folded_into_the_first_user_turn_and_repeats_merged():
    shaped = fit_conversation(CONVERSATION, TemplateFit(system=True, repeats=True))
    assert shaped == [
        {"role": "user", "content": "You are terse.\n\nHi.\n\nName a colour."},
        {"role": "assistant", "content": "Blue."},
        {"role": "user", "content": "Another?"},
        {"role": "assistant", "content": "Red."},
    ]
    assert fit_conversation(CONVERSATION, TemplateFit()) is CONVERSATION
    assert shaped_count([CONVERSATION, shaped], TemplateFit(system=True, repeats=True)) == (1, 1, 0)
    called = [
        {"role": "user", "content": "Weather?"},
        {"role": "assistant", "content": "<tool_call>\n{}\n</tool_call>"},
        {"role": "tool", "content": "<tool_response>\n21\n</tool_response>"},
        {"role": "assistant", "content": "21."},
    ]
    fit = TemplateFit(repeats=True, tool=True)  # a tool's result in the tools fallback becomes a user turn
    assert [m["role"] for m in fit_conversation(called, fit)] == ["user", "assistant", "user", "assistant"]
    assert shaped_count([called], fit) == (0, 0, 1)


@pytest.mark.parametrize(("template", "end"), [(GEMMA, "<end_of_turn>"), (MISTRAL, "<|im_end|>")])
def test_training_tokens_of_a_shaped_conversation_are_the_answers(with_template, template, end):
    """Both the answer-only and the all-tokens paths render; decoded, the trained tokens of the
    answer-only path are each answer and its end-of-turn mark, nothing of the prompts."""
    import datasets

    from trainer_core.data.tokenization import IGNORE, encode_rows

    tokenizer = with_template(template)
    rows = datasets.Dataset.from_dict({"messages": [CONVERSATION]})
    encoded = encode_rows(rows, tokenizer, 256, train_on_completions=True)[0]
    trained = [t for t, label in zip(encoded["input_ids"], encoded["labels"]) if label != IGNORE]
    text = tokenizer.decode(trained)
    assert text.replace(" ", "") == f"Blue.{end}Red.{end}".replace(" ", ""), text
    everything = encode_rows(rows, tokenizer, 256, train_on_completions=False)[0]
    assert "You are terse." in tokenizer.decode(everything["input_ids"])


def test_chat_shapes_the_conversation_as_training_does(with_template):
    from trainer_core.serving.generate import render_prompt

    tokenizer = with_template(GEMMA)
    ids = render_prompt(tokenizer, CONVERSATION[:3])
    text = tokenizer.decode(ids)
    assert "You are terse.\n\nHi.\n\nName a colour." in text and text.endswith("<start_of_turn>model\n")


def test_the_check_says_how_many_rows_were_shaped(tmp_path, tiny_model_dir, datasets_dir):
    import json
    import shutil

    from trainer_core.preflight.check import run_preflight
    from trainer_core.schemas import TrainingStartRequest
    from trainer_core.settings import Settings

    model = tmp_path / "gemma-template"
    shutil.copytree(tiny_model_dir, model)
    (model / "chat_template.jinja").write_text(GEMMA)
    data = tmp_path / "chats.json"
    data.write_text(json.dumps([{"messages": CONVERSATION}, {"messages": CONVERSATION[1:2] + CONVERSATION[3:4]}]))
    settings = Settings(data_dir=tmp_path / "data", allowed_paths=str(tmp_path))
    request = TrainingStartRequest(model_name=str(model), local_datasets=[str(data)], max_seq_length=128)
    report = run_preflight(request, settings, estimates=False)
    notes = [w.message for w in report.warnings if w.code == "template_shaped"]
    assert not report.errors and len(notes) == 1, (report.errors, report.warnings)
    assert (
        "has no system role: the system text of 1 rows" in notes[0] and "1 rows have repeated turns merged" in notes[0]
    )
