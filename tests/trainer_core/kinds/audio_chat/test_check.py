"""The check's line about an audio-in chat model: the kind, the family, the rate and limit clips are
read with, and what the first rows' clips cost in tokens."""

from __future__ import annotations

from trainer_core.kinds.audio_chat.check import audio_chat_summary
from trainer_core.kinds.audio_chat.kind import AUDIO_CHAT
from trainer_core.schemas import TrainingStartRequest
from trainer_core.settings import get_settings


def test_the_line_names_the_kind_and_the_clips(tiny_audio_chat_dir, datasets_dir, tiny_model_dir):
    request = TrainingStartRequest(
        model_name=str(tiny_audio_chat_dir), local_datasets=[str(datasets_dir / "mllm_audio_demo.json")]
    )
    line = audio_chat_summary(request, get_settings(), tiny_audio_chat_dir, AUDIO_CHAT)
    assert line == (
        "audio chat: Qwen2-Audio; padded batches (audio rows are not packed); clips read at 16000 Hz, at most 30 s "
        "each; in the first 3 rows: 3 clips, 12.8 s in all (2.9 to 5.9 s), 25 tokens per second of audio; rows of "
        "113 to 202 tokens with their clips"
    )
    assert audio_chat_summary(request, get_settings(), tiny_model_dir, AUDIO_CHAT) is None  # a text model


def test_rows_whose_clips_alone_fill_max_seq_length_are_refused_at_check_and_start(
    tiny_audio_chat_dir, datasets_dir, tmp_path
):
    """The worker leaves out a row whose audio tokens reach past max_seq_length (a cut clip would
    not match its features) and fails with none left: the check and Start say so first (the demo's
    clips make 73 to 146 audio tokens, more than 64)."""
    from trainer_core.preflight.check import run_preflight, start_issues
    from trainer_core.settings import Settings

    settings = Settings(data_dir=tmp_path, allowed_paths=f"{tiny_audio_chat_dir.parent}:{datasets_dir}")
    request = TrainingStartRequest(
        model_name=str(tiny_audio_chat_dir),
        local_datasets=[str(datasets_dir / "mllm_audio_demo.json")],
        max_seq_length=64,
    )
    report = run_preflight(request, settings, None, False)
    assert [issue.code for issue in report.errors] == ["no_trained_tokens"], report.errors
    assert "3 row(s) have their answer after max_seq_length=64" in report.errors[0].message
    assert report.rows_kept == 0 and report.rows_dropped == 3
    assert [issue.code for issue in start_issues(request, settings)] == ["no_trained_tokens"]
    fits = request.model_copy(update={"max_seq_length": 256})
    assert run_preflight(fits, settings, None, False).errors == [] and start_issues(fits, settings) == []
