"""A base model without a chat template (``default_chat_template``): the default is chosen by the
tokenizer's tokens, shown in the check with an example, changeable, trained with an answer-only
mask that ends at the eos, and saved with the run so chat renders as training did."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from trainer_core.models.templates import TEMPLATES, default_template_name, fill_template


@pytest.fixture(scope="module")
def base_model(tmp_path_factory, tiny_model_dir) -> Path:
    """The tiny SmolLM2 with its chat template removed, as a base checkpoint ships."""
    folder = tmp_path_factory.mktemp("base") / "tiny-base"
    shutil.copytree(tiny_model_dir, folder)
    (folder / "chat_template.jinja").unlink(missing_ok=True)
    config = json.loads((folder / "tokenizer_config.json").read_text())
    config.pop("chat_template", None)
    (folder / "tokenizer_config.json").write_text(json.dumps(config))
    return folder


class _Vocab:
    def __init__(self, tokens):
        self.tokens = tokens

    def get_vocab(self):
        return dict.fromkeys(self.tokens, 0)


def test_auto_is_chatml_only_where_its_markers_are_tokens():
    assert default_template_name(_Vocab(["<|im_start|>", "<|im_end|>", "a"])) == "chatml"
    assert default_template_name(_Vocab(["<|endoftext|>", "a"])) == "zephyr"  # GPT-2-like: eos ends turns
    assert default_template_name(_Vocab(["a"]), "alpaca") == "alpaca"


def test_a_model_with_a_template_keeps_it(tokenizer):
    own = tokenizer.chat_template
    assert fill_template(tokenizer, "alpaca") is None and tokenizer.chat_template == own


@pytest.mark.parametrize("name", ["chatml", "zephyr", "alpaca"])
def test_each_default_trains_exactly_the_answers(base_model, name):
    """Decoding the trained tokens of a two-turn conversation gives the two answers, each followed
    by the template's end of turn (the eos for zephyr and alpaca), and nothing of the prompts."""
    import datasets

    from trainer_core.data.tokenization import tokenize_dataset
    from trainer_core.models.loading import load_tokenizer

    tokenizer = load_tokenizer(base_model, name)
    assert tokenizer.chat_template == TEMPLATES[name] and tokenizer.studio_default_template == name
    messages = [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Capital of France?"},
        {"role": "assistant", "content": "Paris."},
        {"role": "user", "content": "And of Italy?"},
        {"role": "assistant", "content": "Rome."},
    ]
    encoded, _ = tokenize_dataset(datasets.Dataset.from_list([{"messages": messages}]), tokenizer, 256, True)
    labels = [t for t in encoded[0]["labels"] if t != -100]
    trained = tokenizer.decode(labels)
    end = "<|im_end|>" if name == "chatml" else tokenizer.eos_token
    assert "Paris." + end in trained and "Rome." + end in trained
    assert "France" not in trained and "Be brief" not in trained and "Italy" not in trained


@pytest.mark.slow
def test_the_check_shows_the_default_and_the_run_keeps_it(base_model, datasets_dir, tmp_path):
    from tests.conftest import REPO
    from trainer_core.preflight.check import run_preflight
    from trainer_core.schemas import TrainingStartRequest
    from trainer_core.settings import Settings

    settings = Settings(data_dir=tmp_path / "data", allowed_paths=f"{base_model.parent}:{datasets_dir}")
    data = [str(datasets_dir / "identity.json")]
    request = TrainingStartRequest(model_name=str(base_model), local_datasets=data, max_seq_length=128)
    shown = {i.code: i for i in run_preflight(request, settings, estimates=False).warnings}["default_chat_template"]
    assert shown.fields == ["default_chat_template"] and "chatml template" in shown.message
    assert "<|im_start|>user\\nHi<|im_end|>" in shown.message
    alpaca = run_preflight(request.model_copy(update={"default_chat_template": "alpaca"}), settings, estimates=False)
    assert "### Instruction:\\nHi" in {i.code: i for i in alpaca.warnings}["default_chat_template"].message

    out = tmp_path / "run"
    env = dict(os.environ, STUDIO_DATA_DIR=str(tmp_path / "data"))
    done = subprocess.run(
        [sys.executable, "-m", "trainer_core", "train", "--dataset", data[0], "--model-name", str(base_model)]
        + ["--max-steps", "1", "--batch-size", "2", "--max-seq-length", "64", "--output-dir", str(out)]
        + ["--default-chat-template", "zephyr"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0 and "completed" in done.stdout, done.stderr[-2000:]
    from transformers import AutoTokenizer

    saved = AutoTokenizer.from_pretrained(out)
    assert saved.chat_template == TEMPLATES["zephyr"]  # chat and export read the run's tokenizer
