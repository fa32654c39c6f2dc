"""Rendering and generation shared by the inference worker and the CLI, on the real SmolLM2
tokenizer and a tiny random Llama (seconds): prompts render exactly as training renders them,
greedy answers equal ``model.generate``'s, streamed pieces join to the answer, seeds repeat, Stop
ends with ``cancelled``, an over-long prompt is refused, and a LoRA model's base answers come from
the same weights with the adapter disabled."""

from pathlib import Path

import datasets
import pytest
import torch
from transformers import LlamaConfig, LlamaForCausalLM

from trainer_core.data.tokenization import IGNORE, tokenize_dataset
from trainer_core.serving.errors import ChatInputError
from trainer_core.serving.generate import _Streamer, generate, render_prompt, stop_token_ids
from trainer_core.serving.loader import LoadedModel
from trainer_core.serving.schemas import GenerationSettings, ModelChoice

CONTEXT = 96
GREEDY = GenerationSettings(temperature=0, max_new_tokens=12)
MESSAGES = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "What is LoRA?"}]


def _tiny(vocab: int) -> LlamaForCausalLM:
    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=vocab,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=CONTEXT,
    )
    return LlamaForCausalLM(config).eval()


@pytest.fixture(scope="module")
def model(tokenizer):
    return _tiny(len(tokenizer))


def _loaded(model, tokenizer, kind="base", adapter=False) -> LoadedModel:
    choice = ModelChoice(
        id="x", label="x", kind=kind, base_model="tiny", path=None if kind == "base" else "/x", adapter=adapter
    )
    return LoadedModel(choice, model, tokenizer, "cpu", Path("."), CONTEXT, 0.0)


def _answer(loaded, settings=GREEDY, messages=MESSAGES, **kwargs):
    pieces = []
    finish = generate(loaded, messages, settings, on_text=pieces.append, **kwargs)
    return finish, pieces


def test_the_prompt_is_the_training_rendering_up_to_the_first_trained_token(tokenizer):
    conversation = [*MESSAGES, {"role": "assistant", "content": "Low-rank adapters."}]
    rows, _ = tokenize_dataset(datasets.Dataset.from_list([{"messages": conversation}]), tokenizer, 512, True)
    ids, labels = rows[0]["input_ids"], rows[0]["labels"]
    first_trained = next(i for i, label in enumerate(labels) if label != IGNORE)
    assert render_prompt(tokenizer, MESSAGES) == ids[:first_trained]


def test_greedy_answer_equals_model_generate_and_pieces_join_to_it(model, tokenizer):
    finish, pieces = _answer(_loaded(model, tokenizer))
    prompt = render_prompt(tokenizer, MESSAGES)
    with torch.no_grad():
        direct = model.generate(
            torch.tensor([prompt]),
            max_new_tokens=12,
            do_sample=False,
            eos_token_id=stop_token_ids(tokenizer, model),
            pad_token_id=tokenizer.pad_token_id,
        )
    expected = tokenizer.decode(direct[0, len(prompt) :], skip_special_tokens=True)
    assert finish.text == "".join(pieces) == expected and len(pieces) > 1
    assert (finish.reason, finish.prompt_tokens, finish.completion_tokens) == ("length", len(prompt), 12)


def test_the_same_seed_repeats_a_sampled_answer(model, tokenizer):
    loaded = _loaded(model, tokenizer)
    hot = GenerationSettings(temperature=1.5, top_k=0, top_p=1.0, max_new_tokens=16, seed=7)
    first, again = _answer(loaded, hot)[0].text, _answer(loaded, hot)[0].text
    other = _answer(loaded, hot.model_copy(update={"seed": 8}))[0].text
    assert first == again and first != other


def test_an_end_of_turn_token_ends_the_answer_with_stop(tokenizer):
    model = _tiny(len(tokenizer))
    with torch.no_grad():
        model.lm_head.weight.zero_()  # every logit 0: greedy picks id 0, <|endoftext|>
    model.generation_config.eos_token_id = None
    stops = stop_token_ids(tokenizer, model)
    assert {0, tokenizer.convert_tokens_to_ids("<|im_end|>"), tokenizer.eos_token_id} <= set(stops)
    finish, pieces = _answer(_loaded(model, tokenizer))
    assert (finish.reason, finish.completion_tokens, finish.text, pieces) == ("stop", 1, "", [])


def test_stop_flag_ends_the_answer_as_cancelled(model, tokenizer):
    calls = []
    finish, _ = _answer(
        _loaded(model, tokenizer),
        GenerationSettings(temperature=0, max_new_tokens=50),
        should_stop=lambda: calls.append(1) or len(calls) > 3,
    )
    assert finish.reason == "cancelled" and finish.completion_tokens < 10


def test_a_prompt_longer_than_the_context_is_refused(model, tokenizer):
    long = [{"role": "user", "content": "hello " * 200}]
    with pytest.raises(
        ChatInputError,
        match=r"the conversation is \d+ tokens long; with max_new_tokens=12 the model's "
        rf"context of {CONTEXT} tokens leaves room for 84",
    ):
        _answer(_loaded(model, tokenizer), messages=long)
    with pytest.raises(ChatInputError, match="leaves room for 0"):
        _answer(_loaded(model, tokenizer), GenerationSettings(max_new_tokens=200))


def test_streamed_text_never_splits_a_character(tokenizer):
    text = "naïve café — 😀 日本語 ok"
    ids = tokenizer(text, add_special_tokens=False)["input_ids"]
    pieces = []
    streamer = _Streamer(tokenizer, pieces.append)
    streamer.put(torch.tensor([[1, 2]]))  # the prompt: skipped
    for token in ids:
        streamer.put(torch.tensor([token]))
    streamer.end()
    assert "".join(pieces) == tokenizer.decode(ids, skip_special_tokens=True) == text
    assert not any("\ufffd" in piece for piece in pieces)


def test_with_tools_special_tokens_stay_in_the_text_but_the_stop_tokens(tokenizer):
    ids = tokenizer("<|im_start|>call<|im_end|>", add_special_tokens=False)["input_ids"]  # specials: markers here
    for keep, want in ((None, "call"), ({tokenizer.convert_tokens_to_ids("<|im_end|>")}, "<|im_start|>call")):
        pieces = []
        streamer = _Streamer(tokenizer, pieces.append, keep)
        streamer.put(torch.tensor([[1, 2]]))
        for token in ids:
            streamer.put(torch.tensor([token]))
        streamer.end()
        assert "".join(pieces) == want


def test_a_lora_models_base_answer_uses_the_same_weights_with_the_adapter_off(tokenizer):
    from peft import LoraConfig, get_peft_model

    base = _tiny(len(tokenizer))
    base_answer = _answer(_loaded(base, tokenizer))[0].text
    weights_before = {name: p.data_ptr() for name, p in base.named_parameters()}
    peft = get_peft_model(
        base, LoraConfig(r=4, lora_alpha=64, target_modules=["q_proj", "v_proj"], init_lora_weights=False)
    ).eval()
    loaded = _loaded(peft, tokenizer, kind="final", adapter=True)
    tuned = _answer(loaded)[0].text
    finish, _ = _answer(loaded, use_adapter=False)
    assert finish.text == base_answer != tuned
    assert "base" not in loaded.extra  # no second model
    shared = {
        name.removeprefix("base_model.model.").replace(".base_layer", ""): p.data_ptr()
        for name, p in peft.named_parameters()
        if "lora_" not in name
    }
    assert shared == weights_before  # one set of base weights


def test_a_full_fine_tune_loads_its_base_as_a_second_model_for_base_answers(tokenizer, tmp_path):
    from trainer_core.serving.loader import load_choice

    base, tuned = _tiny(len(tokenizer)), _tiny(len(tokenizer))
    with torch.no_grad():
        tuned.lm_head.weight.neg_()  # "trained": different weights, same architecture
    for model, folder in ((base, tmp_path / "base"), (tuned, tmp_path / "run")):
        model.save_pretrained(folder)
        tokenizer.save_pretrained(folder)
    choice = ModelChoice(
        id="run", label="run", kind="final", base_model=str(tmp_path / "base"), path=str(tmp_path / "run")
    )
    loaded = load_choice(choice, tmp_path, device="cpu")
    assert not loaded.choice.adapter and loaded.context_tokens == CONTEXT and "base" not in loaded.extra
    tuned_answer = _answer(loaded)[0].text
    base_answer = _answer(loaded, use_adapter=False)[0].text
    assert "base" in loaded.extra  # loaded on the first base answer, kept for the next
    assert tuned_answer == _answer(_loaded(tuned, tokenizer))[0].text
    assert base_answer == _answer(_loaded(base, tokenizer))[0].text != tuned_answer


def test_a_text_only_model_refuses_an_audio_clip_naming_the_message():
    from trainer_core.serving.generate import text_only

    messages = [
        {"role": "user", "content": "Hi"},
        {"role": "user", "content": "And?", "audios": ["data:audio/wav;base64,AA"]},
    ]
    with pytest.raises(ChatInputError, match=r"messages\[1\]: it holds an audio clip and this model reads text only"):
        text_only(messages)
    assert text_only(messages[:1]) == [{"role": "user", "content": "Hi"}]


TIME_TOOL = [{"type": "function", "function": {"name": "get_time", "parameters": {"type": "object", "properties": {}}}}]
TOOL_TURNS = [
    {"role": "user", "content": "Time?"},
    {"role": "assistant", "content": '<tool_call>\n{"name": "get_time", "arguments": {}}\n</tool_call>'},
    {"role": "tool", "content": "<tool_response>\nnoon\n</tool_response>"},
]


def test_tools_render_with_the_models_template_or_the_fallback(tokenizer):
    from tests.support.chat_templates import with_template

    qwen = with_template(tokenizer, "qwen2.5")
    text = tokenizer.decode(render_prompt(qwen, TOOL_TURNS, TIME_TOOL))
    assert '{"type": "function", "function": {"name": "get_time"' in text  # Qwen's own <tools> block
    assert text.count("<tool_response>") == 1 and text.endswith("<|im_start|>assistant\n")
    fallback = tokenizer.decode(render_prompt(tokenizer, TOOL_TURNS, TIME_TOOL))  # SmolLM2's template: no tools
    assert "You have access to the following tools:\n<tools>" in fallback and "noon" in fallback
    with pytest.raises(ChatInputError, match="messages: turn 2, call 1: not valid JSON"):
        render_prompt(qwen, [*TOOL_TURNS[:1], {"role": "assistant", "content": "<tool_call>\n{\n</tool_call>"}], [])


def test_the_worker_reads_calls_in_the_models_format_and_streams_the_text_before(tokenizer):
    from trainer_core.serving.worker import with_calls

    answer = 'Let me see.\n<tool_call>\n{"name": "get_time", "arguments": {"zone": "UTC"}}\n</tool_call>'

    def generated(request, on_text):
        for i in range(0, len(answer), 4):
            on_text(answer[i : i + 4])
        return {"finish_reason": "stop", "prompt_tokens": 3, "completion_tokens": 9}

    for choice, streamed, names in (("auto", "Let me see.\n", ["get_time"]), ("none", answer, [])):
        sent = []
        done = with_calls({"tools": TIME_TOOL, "tool_choice": choice}, tokenizer, sent.append, generated)
        assert "".join(sent) == streamed and [c["function"]["name"] for c in done.get("tool_calls", [])] == names
    assert with_calls({}, tokenizer, [].append, generated) == generated({}, lambda text: None)
    other = [{"type": "function", "function": {"name": "get_date", "parameters": {"type": "object"}}}]
    sent = []
    assert "tool_calls" not in with_calls({"tools": other}, tokenizer, sent.append, generated)  # not offered
    assert "".join(sent) == answer


def test_a_raw_prompt_is_tokenized_as_it_is(model, tokenizer):
    settings = GenerationSettings(temperature=0, max_new_tokens=2)
    finish, pieces = _answer(_loaded(model, tokenizer), settings, messages=[], raw_prompt="Once upon a time")
    assert finish.prompt_tokens == len(tokenizer("Once upon a time")["input_ids"]) and "".join(pieces) == finish.text
