"""The speech-to-text model in the inference worker (``kinds.speech_to_text.serve``, run in-process
here): a LoRA run's transcript equals its own ``generate`` (the adapter loaded on its base with
PEFT, the run's language), the base answers with the adapter off, the duration and the run's
language reported; refusals: a chat request, audio that is no audio, a language Whisper lacks."""

from __future__ import annotations

import base64

import pytest
import torch

from tests.support.speech_data import CLIPS
from tests.support.speech_runs import lora_speech_run
from trainer_core.kinds.speech_to_text.kind import SPEECH_TO_TEXT
from trainer_core.model_kind import kind_for_folder, serving_kind
from trainer_core.serving.errors import ChatInputError
from trainer_core.serving.schemas import ModelChoice

CLIP = "data:audio/wav;base64," + base64.b64encode((CLIPS / "2.wav").read_bytes()).decode()


@pytest.fixture(scope="module")
def run_folder(tiny_whisper_dir, tmp_path_factory):
    return lora_speech_run(tiny_whisper_dir, tmp_path_factory.mktemp("stt") / "run")


def _generate(model, processor, language):
    from trainer_core.data.audio import read_audio

    clip = read_audio(CLIP, sampling_rate=16000)
    features = processor.feature_extractor([clip], sampling_rate=16000, return_tensors="pt").input_features
    with torch.inference_mode():
        ids = model.generate(input_features=features, language=language, task="transcribe", do_sample=False)
    return processor.tokenizer.decode(ids[0], skip_special_tokens=True).strip()


def test_a_lora_run_answers_its_own_generate_and_its_base_with_the_adapter_off(run_folder, tiny_whisper_dir, tmp_path):
    from peft import PeftModel
    from transformers import AutoModelForSpeechSeq2Seq, WhisperProcessor

    assert kind_for_folder(run_folder) is SPEECH_TO_TEXT  # no config.json: its adapter's base says
    assert serving_kind("transcriptions") is SPEECH_TO_TEXT
    choice = ModelChoice(
        id="job_s",
        label="s",
        kind="final",
        base_model=str(tiny_whisper_dir),
        path=str(run_folder),
        adapter=True,
        serves="transcriptions",
    )
    server = SPEECH_TO_TEXT.load_server(choice, tmp_path)
    tuned = server.answer({"audio": CLIP})
    processor = WhisperProcessor.from_pretrained(run_folder)
    base = AutoModelForSpeechSeq2Seq.from_pretrained(tiny_whisper_dir).eval()
    own = PeftModel.from_pretrained(AutoModelForSpeechSeq2Seq.from_pretrained(tiny_whisper_dir), run_folder).eval()
    assert tuned["text"] == _generate(own, processor, "en") and tuned["text"]
    assert tuned["language"] == "en" and tuned["duration"] == pytest.approx(2.9, abs=0.1)
    off = server.answer({"audio": CLIP, "use_adapter": False, "language": "de"})
    assert off["text"] == _generate(base, processor, "de") and off["language"] == "de"
    with pytest.raises(ChatInputError) as chat:
        server.answer({"messages": [{"role": "user", "content": "hi"}], "settings": {}})
    assert chat.value.code == "speech_to_text_model" and chat.value.fields == ("model",)
    with pytest.raises(ChatInputError) as noise:
        server.answer({"audio": "data:audio/wav;base64," + base64.b64encode(b"RIFF nothing").decode()})
    assert noise.value.fields == ("file",)
    with pytest.raises(ChatInputError) as language:
        server.answer({"audio": CLIP, "language": "klingon"})
    assert language.value.fields == ("language",)
