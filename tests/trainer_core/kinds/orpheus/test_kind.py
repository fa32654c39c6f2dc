"""The Orpheus-style kind: found from its folder (a Llama whose tokenizer adds the SNAC code tokens),
refused at the check without its codec (naming where it looked), a codec folder outside the allowed
folders refused by the admission; its ids read from the tokenizer by name; a frame's codes interleaved and back exactly;
and a prepared run's labels holding its speech alone (asserted by decoding), its check counting
what training encodes."""

from __future__ import annotations

import json
import time

import pytest

from tests.support.speech_data import speech_request
from tests.support.tts_data import tts_file
from trainer_core import model_kind
from trainer_core.admission.request_paths import PathNotAllowed, checked_request
from trainer_core.kinds.orpheus import codec as snac
from trainer_core.kinds.orpheus.check import orpheus_report
from trainer_core.kinds.orpheus.data import prepare_orpheus_data
from trainer_core.kinds.orpheus.family import SNAC_CODES
from trainer_core.kinds.orpheus.kind import ORPHEUS
from trainer_core.kinds.orpheus.tokens import OrpheusTokens, custom, deinterleave, interleave
from trainer_core.kinds.orpheus.trainer import IGNORE, SpeechCollator
from trainer_core.models.loading import load_tokenizer
from trainer_core.refusals import Refusal
from trainer_core.request.audio import SNAC_24KHZ


def test_an_orpheus_folder_is_found_and_refused_without_its_codec(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    folder = tmp_path / "orpheus"
    folder.mkdir()
    config = {"model_type": "llama", "vocab_size": 156_940}  # Orpheus 3B's
    (folder / "config.json").write_text(json.dumps(config))
    added = {str(128256 + i): {"content": f"<custom_token_{i}>"} for i in range(SNAC_CODES)}
    (folder / "tokenizer_config.json").write_text(json.dumps({"added_tokens_decoder": added}))
    assert model_kind.kind_for_folder(folder) is ORPHEUS and ORPHEUS.serves == "speech"
    assert "Orpheus" in model_kind.picker_note(config, folder)
    assert model_kind.picker_note({"model_type": "llama", "vocab_size": 128_256}) == ""
    assert "audio_codec" in ORPHEUS.form_fields and ORPHEUS in model_kind.readers_of("audio")
    report = ORPHEUS.check_report(speech_request(folder, tmp_path / "x.json"), folder, None, time.perf_counter())
    assert [e.code for e in report.errors] == ["tts_codec_missing"]
    assert "hubertsiuzdak/snac_24khz: not in the Hub cache" in report.errors[0].message
    (tmp_path / "x.json").write_text("[]")
    outside = speech_request(folder, tmp_path / "x.json", audio_codec="/etc")
    with pytest.raises(PathNotAllowed, match="audio_codec: /etc is outside"):  # every door's admission
        checked_request(outside, [tmp_path])
    assert checked_request(speech_request(folder, tmp_path / "x.json"), [tmp_path]).audio_codec == SNAC_24KHZ
    (folder / "tokenizer_config.json").write_text(json.dumps({"added_tokens_decoder": {}}))
    assert model_kind.kind_for_folder(folder).name == "causal"  # a plain Llama


def test_a_frame_s_codes_interleave_and_come_back_exactly():
    import random

    rng = random.Random(0)
    levels = [[rng.randrange(4096) for _ in range(n * 5)] for n in (1, 2, 4)]  # 5 frames
    tokens = interleave(levels, 100)
    assert len(tokens) == 35 and tokens[:2] == [100 + levels[0][0], 100 + 4096 + levels[1][0]]
    assert tokens[4] == 100 + 4 * 4096 + levels[1][1] and tokens[6] == 100 + 6 * 4096 + levels[2][3]
    assert deinterleave(tokens, 100) == levels
    assert deinterleave(tokens + tokens[:3], 100) == levels  # a last partial frame is dropped
    with pytest.raises(ValueError, match="frame position 1"):
        deinterleave([tokens[0], tokens[0], *tokens[2:7]], 100)


def test_the_ids_are_read_from_the_tokenizer_by_name(tiny_orpheus_dir, tokenizer):
    found = load_tokenizer(tiny_orpheus_dir)
    ids = OrpheusTokens.of(found)
    name = found.convert_tokens_to_ids
    assert (ids.start_of_speech, ids.end_of_ai, ids.pad) == (name(custom(1)), name(custom(6)), name(custom(7)))
    assert ids.first_code == name(custom(10)) and ids.end_of_text == found.eos_token_id  # no <|eot_id|> here
    with pytest.raises(Refusal, match="<custom_token_1>"):
        OrpheusTokens.of(tokenizer)  # the plain SmolLM2 tokenizer


def test_only_the_speech_is_scored_and_the_check_counts_what_training_encodes(
    tiny_orpheus_dir, tiny_snac_dir, tmp_path
):
    from trainer_core.data.audio import read_audio

    data = tts_file(tmp_path / "data", speakers=("tara", "leo"))
    request = speech_request(tiny_orpheus_dir, data, max_seq_length=1024, audio_codec=str(tiny_snac_dir))
    tokenizer = load_tokenizer(tiny_orpheus_dir)
    prepared = prepare_orpheus_data(request, tokenizer)
    ids = OrpheusTokens.of(tokenizer)
    batch = SpeechCollator(ids.pad)([prepared.train[0], prepared.train[1]])
    codec, config = snac.request_codec(request, "cpu")
    for i, row in enumerate(prepared.train):
        labels = batch["labels"][i]
        scored = labels[labels != IGNORE].tolist()
        prompt = tokenizer.decode(batch["input_ids"][i][: row["prompt_length"]])
        assert prompt == f"{custom(3)}{row['speaker']}: {row['text']}<|im_end|>{custom(4)}{custom(5)}{custom(1)}"
        assert scored[-2:] == [ids.end_of_speech, ids.end_of_ai]
        assert (labels[: row["prompt_length"]] == IGNORE).all()
        clip = read_audio(row["audio"], sampling_rate=24000)
        assert len(scored) - 2 == 7 * snac.frames(len(clip), config)
        assert deinterleave(scored[:-2], ids.first_code) == snac.encode(codec, clip)
    report = orpheus_report(request, tiny_orpheus_dir, time.perf_counter(), ORPHEUS)
    assert report.no_estimates == "no memory or time estimates for text-to-speech (Orpheus, SNAC codec) models"
    assert report.errors == [] and report.vision.startswith(f"Text-to-speech (Orpheus, SNAC {tiny_snac_dir}): 2 clips")
    assert (report.tokens_total, report.tokens_trained) == (prepared.stats.total_tokens, prepared.stats.trained_tokens)
