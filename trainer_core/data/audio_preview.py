"""The dataset preview's audio: a small player for each clip of the first rows (as the preview
shows image thumbnails) with its duration, and a note on all the clips of the rows checked.

A player is an HTML ``<audio>`` whose ``src`` is a ``data:audio/mpeg`` URL of the clip's first
``PREVIEW_SECONDS`` seconds, read through the one audio opener (``data.audio.read_audio``: the path
check was passed when the clip was resolved) at ``PREVIEW_RATE`` Hz mono and encoded as MP3 by
soundfile (about 6 KB a second: 34 KB for the 5.9 s of the demo's 3.flac); nothing on disk is
served.
"""

from __future__ import annotations

import base64
import io
from typing import Any, Optional

from trainer_core.data.audio_rows import Clip, ClipStats, detected_words

PREVIEW_RATE = 16_000  # Hz of the preview players (speech)
PREVIEW_SECONDS = 20.0  # seconds of each clip the player holds
NOTE_ROWS = 200  # rows whose clips the preview's note counts (headers only)


def player_url(reference: str, seconds: float = PREVIEW_SECONDS) -> str:
    """A ``data:audio/mpeg;base64,`` URL of the first ``seconds`` of a canonical clip reference
    (``audio.resolve_audio``), mono at ``PREVIEW_RATE`` Hz. Raises RowError as ``read_audio`` does."""
    import soundfile

    from trainer_core.data.audio import read_audio

    samples = read_audio(reference, PREVIEW_RATE)[: int(seconds * PREVIEW_RATE)]  # (samples,) float32
    buffer = io.BytesIO()
    soundfile.write(buffer, samples, PREVIEW_RATE, format="MP3", subtype="MPEG_LAYER_III")
    return "data:audio/mpeg;base64," + base64.b64encode(buffer.getvalue()).decode("ascii")


def duration_text(seconds: float) -> str:
    """A clip's duration for people: "4.0 s", "1:05.2" from a minute on."""
    if seconds < 60:
        return f"{seconds:.1f} s"
    minutes, rest = divmod(seconds, 60)
    return f"{int(minutes)}:{rest:04.1f}"


def clip_cell(clip: Clip, escape: Any = str) -> str:
    """One clip of a preview row: its player, name and duration (``escape``: the table's Markdown
    escaping for the name)."""
    player = f'<audio controls preload="none" src="{player_url(clip.reference)}"></audio>'
    cut = f", the first {PREVIEW_SECONDS:g} s" if clip.seconds > PREVIEW_SECONDS else ""
    return f"{player} {escape(clip.name)} ({duration_text(clip.seconds)}{cut})"


def row_cells(stats: ClipStats, first_row: int, rows: int, escape: Any = str) -> list[str]:
    """The ``audio`` cells of the first ``rows`` rows whose clips are in ``stats`` (its rows start
    at file row ``first_row``): each row's players, "" for a row without clips."""
    by_row: dict[int, list[Clip]] = {}
    for clip in stats.clips:
        by_row.setdefault(clip.row, []).append(clip)
    return [" ".join(clip_cell(c, escape) for c in by_row.get(first_row + i, [])) for i in range(rows)]


def preview_note(stats: ClipStats, is_dataset_audio: Optional[bool], max_seconds: Optional[float]) -> str:
    """The preview's line on the clips of the rows checked, e.g. "Audio: 3 clips in the first 3
    rows, 13.6 s in all, longest 5.9 s (row 3, 3.flac); is_dataset_audio: found from the data (yes)"."""
    switch = detected_words(is_dataset_audio, bool(stats.clips))
    longest = stats.longest
    if longest is None:
        return f"Audio: none in the first {stats.rows} rows; {switch}"
    over = stats.over(max_seconds)
    limit = f"; {len(over)} over max_audio_seconds ({max_seconds:g} s)" if over else ""
    return (
        f"Audio: {len(stats.clips)} clips in the first {stats.rows} rows, {duration_text(stats.total_seconds)} in all, "
        f"longest {duration_text(longest.seconds)} (row {longest.row}, {longest.name}){limit}; {switch}"
    )


def audio_sample(
    checked: Any,
    source: str,
    base: Any,
    rows: int,
    kind: Any,
    is_dataset_audio: Optional[bool],
    max_seconds: Optional[float],
    escape: Any = str,
) -> Optional[tuple[list[str], str]]:
    """(the ``audio`` cells of the first ``rows`` rows, the preview's note) of ``checked`` (the rows
    the preview reads of ``source``, relative clip paths read from ``base``) for a model of ``kind``;
    None where the model reads no audio and ``is_dataset_audio`` is not on, or the rows keep no
    clips (``escape``: the table's Markdown escaping of names). Raises DatasetError naming the file and row (``audio_rows.checked_clips``) or
    ``is_dataset_audio`` (``audio_rows.audio_switch``)."""
    from trainer_core.data.audio_rows import audio_switch, checked_clips, has_audio
    from trainer_core.settings import get_settings

    reads = kind is not None and "audio" in kind.media
    if not reads and not is_dataset_audio:
        return None
    if not audio_switch(is_dataset_audio, has_audio(checked), reads, "the chosen model"):
        return None
    roots = get_settings().allowed_roots
    head = checked.select(range(min(NOTE_ROWS, len(checked))))
    stats = checked_clips(head, source, base, roots, max_seconds, decode=rows)
    return row_cells(stats, 1, min(rows, len(checked)), escape), preview_note(stats, is_dataset_audio, max_seconds)
