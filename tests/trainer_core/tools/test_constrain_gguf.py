"""The constraint on a GGUF through the GGUF worker's own ``generate`` (llama.cpp, the bundled
SmolLM2 q4): sampled calls parse and match the schema, integer bounds included (which llama.cpp's
JSON-to-GBNF converter drops); a cut answer ends with ``length``."""

import dataclasses
import json

import jsonschema
import pytest

from tests.trainer_core.tools.test_constrain import MESSAGES, TOOLS, WEATHER
from trainer_core.llamacpp import build as tools
from trainer_core.serving import gguf_worker
from trainer_core.tools.constrain import call_constraint
from trainer_core.tools.constrain_gguf import stop_ids

SETTINGS = {"top_k": 0, "top_p": 1.0, "temperature": 1.0, "repetition_penalty": 1.0, "max_new_tokens": 80}


@pytest.fixture(scope="module")
def llm():
    from trainer_core.models.loading import bundled_gguf_path
    from trainer_core.settings import get_settings

    llama_dir = get_settings().llama_cpp_dir
    if tools.missing_message(llama_dir):  # .ci/run fails before the tests when it is missing
        pytest.skip(tools.missing_message(llama_dir))
    model, n_ctx, _ = gguf_worker.load(str(bundled_gguf_path()), str(llama_dir))
    yield model, n_ctx
    model.close()


def _answer(llm, constraint, seed, max_new_tokens=80):
    model, n_ctx = llm
    prompt = "<|im_start|>user\n" + MESSAGES[0]["content"] + "<|im_end|>\n<|im_start|>assistant\n"
    ids = model.tokenize(prompt.encode(), special=True)
    pieces = []
    settings = {**SETTINGS, "seed": seed, "max_new_tokens": max_new_tokens}
    reason, _ = gguf_worker.generate(model, n_ctx, ids, settings, pieces.append, lambda: False, constraint=constraint)
    return reason, "".join(pieces)


def test_sampled_gguf_calls_parse_and_match_the_schema_bounds_included(llm):
    constraint = dataclasses.asdict(call_constraint(TOOLS, "get_weather", "<tool_call>\n", "\n</tool_call>"))
    for seed in range(2):
        reason, text = _answer(llm, constraint, seed)
        assert reason == "stop", text
        call = json.loads(text.removeprefix("<tool_call>\n").removesuffix("\n</tool_call>"))
        assert call["name"] == "get_weather"
        jsonschema.validate(call["arguments"], WEATHER)
    reason, text = _answer(llm, constraint, 0, max_new_tokens=5)
    assert reason == "length" and text.startswith("<tool_call>")


def test_the_end_of_turn_token_is_among_the_stop_ids(llm):
    model, _ = llm
    (end_of_turn,) = model.tokenize(b"<|im_end|>", add_bos=False, special=True)
    assert end_of_turn in stop_ids(model)
