"""The model card of a merged export of an audio kind (``export.card.render`` with the folder's
``ModelKind``): the Hub's ``pipeline_tag`` and tag in its front matter, and a usage snippet that
works: the speech-to-text and audio chat ones run here against the tiny model of their kind, on a
demo clip (the text-to-speech one, transformers' CSM docs' ``generate(output_audio=True)`` and
``save_audio``, was run by hand on the tiny CSM: 5 s more here)."""

from __future__ import annotations

import contextlib
import io

import pytest

from trainer_core.export.card import RunFacts, render
from trainer_core.kinds.audio_chat.kind import AUDIO_CHAT
from trainer_core.kinds.speech_to_text.kind import SPEECH_TO_TEXT
from trainer_core.kinds.text_to_speech.kind import TEXT_TO_SPEECH
from trainer_core.model_kind import kind_named

FACTS = RunFacts(
    name="job_1", base_model="/models/x", hub_base=None, request={"training_type": "lora", "language": "en"}
)


def _snippet(card: str) -> str:
    """The card's usage code (its last ``python`` block)."""
    return card.rsplit("```python\n", 1)[1].split("```", 1)[0]


@pytest.mark.parametrize(
    ("kind", "tag", "words"),
    [
        (SPEECH_TO_TEXT, "automatic-speech-recognition", "generate_kwargs={'language': 'en', 'task': 'transcribe'}"),
        (AUDIO_CHAT, "audio-text-to-text", "AutoModelForMultimodalLM.from_pretrained"),
        (TEXT_TO_SPEECH, "text-to-speech", "model.generate(**inputs, output_audio=True)"),
    ],
)
def test_a_merged_card_names_its_pipeline_and_says_how_to_use_it(kind, tag, words):
    card = render(FACTS, "merged", ["model.safetensors"], None, [], "float32", (), kind)
    assert card.startswith(f"---\npipeline_tag: {tag}\n") and f"- {tag}\n" in card
    assert "## How to use" in card and words in _snippet(card) and "AutoModelForCausalLM" not in card
    adapter = render(FACTS, "adapter", ["adapter_model.safetensors"], None, [], None, (), kind)
    assert "pipeline_tag" not in adapter  # an adapter zip is loaded onto its base: no pipeline of its own
    loads = f"from transformers import {kind.auto_class}, AutoProcessor"  # its base with its kind's class
    assert loads in adapter and f'base = {kind.auto_class}.from_pretrained("/models/x")' in adapter
    assert "AutoModelForCausalLM" not in adapter


def test_a_text_model_card_is_unchanged():
    card = render(FACTS, "merged", ["model.safetensors"], None, [], "float32", (), kind_named("causal"))
    assert "pipeline_tag" not in card and "AutoModelForCausalLM.from_pretrained" in card
    adapter = render(FACTS, "adapter", [], None, [], None, (), kind_named("causal"))
    assert "from transformers import AutoModelForCausalLM, AutoTokenizer" in adapter


def test_the_audio_in_snippets_run_on_the_tiny_model_of_their_kind(tiny_whisper_dir, tiny_audio_chat_dir, datasets_dir):
    clip = str(datasets_dir / "mllm_demo_data" / "2.wav")
    said = {}
    for kind, folder in ((SPEECH_TO_TEXT, tiny_whisper_dir), (AUDIO_CHAT, tiny_audio_chat_dir)):
        code = _snippet(render(FACTS, "merged", [], None, [], "float32", (), kind)).replace(
            "PATH_TO_THIS_FOLDER", str(folder)
        )
        code = code.replace('read("speech.wav"', f'read("{clip}"').replace('read("question.wav"', f'read("{clip}"')
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            exec(compile(code.replace("max_new_tokens=64", "max_new_tokens=4"), kind.name, "exec"), {})  # noqa: S102
        said[kind.name] = out.getvalue()
    assert said["speech_to_text"].strip() and said["audio_chat"].strip()  # random weights: some text
