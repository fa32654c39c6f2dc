"""The CLI check's text and the page's report show the audio line (``report.audio``) beside the
model's line, with or without the model's structure (a model not on this machine has none)."""

from __future__ import annotations

from trainer_core.cli.check import render
from trainer_core.preflight.report import LengthHistogram, PreflightReport
from ui.preflight_view import report_html

LINE = "audio: 3 clips in 3 rows, 12.8 s in all, longest 5.9 s (row 3, 3.flac); is_dataset_audio: found from the data (yes)"


def test_the_audio_line_is_shown_by_the_cli_and_the_page() -> None:
    report = PreflightReport(
        model_name="m",
        tokenizer_found=True,
        max_seq_length=16,
        files=[],
        rows_read=3,
        rows_kept=3,
        rows_dropped=0,
        rows_truncated=0,
        rows_truncated_share=0.0,
        tokens_total=0,
        tokens_trained=0,
        tokens_cut=0,
        rows_without_trained_tokens=0,
        eval_rows=0,
        histogram=LengthHistogram(),
        samples=[],
        global_batch_size=1,
        steps_per_epoch=3,
        total_steps=3,
        epochs=1.0,
        audio=LINE,
    )
    shown = "Audio" + LINE[5:]
    assert shown in render(report, colour=False)
    structured = report.model_copy(update={"architecture": "WhisperForConditionalGeneration", "attention": "sdpa"})
    assert shown in render(structured, colour=False).splitlines()
    assert f"<li>{shown}</li>" in report_html(structured)
