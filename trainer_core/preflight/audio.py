"""The check's audio line and the audio refusals Check and Start share: every clip of the local
training and evaluation files through the one audio opener (``data.audio_rows.checked_clips``),
refused by file and row; ``is_dataset_audio`` against the data and the model's kind
(``data.audio_rows.audio_switch``); and one line: clips, total and longest duration, the sampling
rates of the files and the one they are read at, clips over ``max_audio_seconds``.

Asked only where the model's kind reads audio (``ModelKind.media``) or ``is_dataset_audio`` is on;
audio rows for any other model are refused where its rows are made (``data.media.refuse_media``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Optional

from trainer_core.data.errors import DatasetError
from trainer_core.model_kind import kind_for_request
from trainer_core.preflight.report import Issue
from trainer_core.preflight.rules import data_error

DEFAULT_MAX_SECONDS = 30.0  # max_audio_seconds where the request has no such field
FEATURE_EXTRACTOR_FILE = "preprocessor_config.json"  # where a processor saved its sampling_rate (transformers 4)
PROCESSOR_FILE = "processor_config.json"  # transformers 5: the feature extractor is a section of it


def model_sampling_rate(folder: Optional[Path]) -> Optional[int]:
    """The sampling rate (Hz) the feature extractor saved with the model in ``folder`` reads audio
    at: ``preprocessor_config.json``'s ``sampling_rate``, or (processors saved by transformers 5)
    ``processor_config.json``'s ``feature_extractor.sampling_rate``; None when unknown."""
    if folder is None:
        return None
    for name, section in ((FEATURE_EXTRACTOR_FILE, None), (PROCESSOR_FILE, "feature_extractor")):
        try:
            saved = json.loads((Path(folder) / name).read_text(encoding="utf-8"))
            value = (saved.get(section) if section else saved).get("sampling_rate")
        except (OSError, ValueError, AttributeError):
            continue
        if isinstance(value, int) and value > 0:
            return value
    return None


def read_rate(request: Any, folder: Optional[Path]) -> tuple[Optional[int], str]:
    """(Hz the clips are read at, where that comes from): ``sampling_rate`` when set, else the
    model's feature extractor's; (None, "") when neither is known."""
    given = getattr(request, "sampling_rate", None)
    if given:
        return int(given), "sampling_rate"
    found = model_sampling_rate(folder)
    return (found, "the model's feature extractor") if found else (None, "")


def audio_check(request: Any, settings: Any, folder: Optional[Path]) -> tuple[Optional[str], list[Issue]]:
    """(the check's audio line or None, errors) of ``request`` (its model saved in ``folder`` or not
    here: None). Errors (code ``data_error``) for a clip that cannot be used, named by file and row,
    and for ``is_dataset_audio`` against the data or the model. Hub data is left to the worker
    (read only there). No line and no errors where the model reads no audio and the switch is not on."""
    from trainer_core.data.audio_rows import ClipStats, audio_switch, checked_clips, has_audio
    from trainer_core.data.formats import apply_mapping
    from trainer_core.data.prepare import source_parts

    reads = "audio" in kind_for_request(request, folder).media
    switch = getattr(request, "is_dataset_audio", None)
    if not reads and not switch:
        return None, []
    max_seconds = getattr(request, "max_audio_seconds", DEFAULT_MAX_SECONDS)
    stats, with_audio = ClipStats(), False
    try:
        if request.hf_dataset and not request.local_datasets:
            audio_switch(switch, True, reads, request.model_name)  # the Hub's clips: the worker's to read
            return "audio: the Hub dataset's clips are read and checked when the run starts", []
        local = request.model_copy(update={"hf_dataset": None})  # the local files' clips; the Hub's: the worker
        parts = source_parts(local) + (source_parts(local, eval=True) if request.local_eval_datasets else [])
        for name, dataset, first_row, base in parts:
            if request.custom_format_mapping:
                dataset = apply_mapping(dataset, request.custom_format_mapping, name)
            if has_audio(dataset):
                with_audio = True
                stats.add(checked_clips(dataset, name, base, settings.allowed_roots, max_seconds, first_row))
        audio_switch(switch, with_audio, reads, request.model_name)
    except DatasetError as exc:
        return None, [data_error(exc)]
    return audio_line(stats, request, folder, max_seconds), []


def audio_line(stats: Any, request: Any, folder: Optional[Path], max_seconds: Optional[float]) -> str:
    """e.g. "audio: 3 clips in 3 rows, 13.6 s in all, longest 5.9 s (row 2, 2.wav); files at 16000 /
    44100 Hz, read at 16000 Hz (the model's feature extractor); none over max_audio_seconds (30 s);
    is_dataset_audio: found from the data (yes)"."""
    from trainer_core.data.audio_rows import detected_words

    switch = detected_words(getattr(request, "is_dataset_audio", None), bool(stats.clips))
    longest = stats.longest
    if longest is None:
        return f"audio: the data holds no audio clips; {switch}"
    rates = " / ".join(str(rate) for rate in sorted({clip.sampling_rate for clip in stats.clips}))
    rate, source = read_rate(request, folder)
    read_at = f"read at {rate} Hz ({source})" if rate else "read at the model's own rate once it is loaded"
    stereo = sum(1 for clip in stats.clips if clip.channels > 1)
    mixed = f", {stereo} stereo clip(s) mixed down to mono" if stereo else ""
    over = len(stats.over(max_seconds))
    limit = f"{over or 'none'} over max_audio_seconds ({max_seconds:g} s)" if max_seconds else "no length limit"
    rows = sum(1 for references in stats.references if references)
    return (
        f"audio: {len(stats.clips)} clips in {rows} rows, {stats.total_seconds:.1f} s in all, longest "
        f"{longest.seconds:.1f} s (row {longest.row}, {longest.name}); files at {rates} Hz, {read_at}{mixed}; "
        f"{limit}; {switch}"
    )
