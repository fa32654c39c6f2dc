"""Training rows with audio clips, in canonical form: ``messages`` (turns whose text holds one
``<audio>`` marker where each clip goes) and ``audios`` (one canonical reference per marker, in
order: ``data.audio.resolve_audio``: an absolute confined path or a ``data:`` URL).

The layouts people bring:
- LLaMA-Factory: ``messages`` (or ``conversations``) with ``<audio>`` markers and an ``audios`` list
  of paths relative to the data file (``mllm_audio_demo.json``);
- OpenAI content parts: ``{"type": "input_audio", "input_audio": {"data": <base64>, "format":
  "wav"}}`` (or ``{"type": "audio", "audio": <path>}`` / ``"audio_url"``) inside a turn's content;
  each becomes a marker where it stood;
- a Hugging Face dataset with an ``Audio`` column (one clip or a list), usually without markers: a
  row without any marker gets its clips at the start of its first user turn.

Each row is checked when it is read, so the Check and Start refuse it by file and row: every clip
passes the path check and its header reads as audio, and a row with markers has exactly as many
markers as clips. Images and video in the same rows stay refused (``data.media``). Which columns and
content parts hold clips, and what a part names, is ``data.audio_rows``' (the Check's too).
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Optional

import datasets

from trainer_core.data.audio import MARKER, audio_info, resolve_audio
from trainer_core.data.audio_rows import PART_TYPES, clip_columns, clip_reference
from trainer_core.data.errors import DatasetError, RowError
from trainer_core.data.formats import MESSAGE_FEATURES, normalize_with_notes
from trainer_core.data.media import refuse_media
from trainer_core.data.media_rows import column_references, lift_parts, place_markers
from trainer_core.data.tool_rows import TOOLS, in_system
from trainer_core.vocabulary import FormatType

AUDIO_CHAT_FEATURES = datasets.Features({**MESSAGE_FEATURES, "audios": datasets.List(datasets.Value("string"))})


def normalize_audio_chat(
    dataset: datasets.Dataset,
    fmt: FormatType,
    source: str,
    base: Optional[Path],
    roots: Iterable[Path],
    first_row: int = 1,
) -> tuple[datasets.Dataset, list[str]]:
    """Canonical audio chat rows (columns ``messages`` and ``audios``, ``AUDIO_CHAT_FEATURES``) of one
    source and the notes of ``formats.normalize_with_notes``. ``base``: the folder relative clip
    paths are read from (the data file's); ``roots``: the allowed folders. Raises DatasetError naming
    ``source`` and the file row for a missing, unreadable or disallowed clip, a marker count that
    differs from the clip count, a row with images or video, and whatever the text layout refuses."""
    roots = list(roots)
    columns = clip_columns(dataset)
    references = column_references(dataset, columns)
    text_only = dataset.remove_columns(columns)
    refuse_media(text_only, source, first_row)  # images and video
    part_refs, text_only = lift_parts(text_only, PART_TYPES, lambda part: part, MARKER)  # read in the row's checks
    canonical, notes = normalize_with_notes(text_only, fmt, source, first_row)
    rows_audios: list[list[str]] = []
    messages_out = []
    for index, (messages, tools) in enumerate(zip(canonical["messages"], canonical[TOOLS])):
        messages = in_system(messages, tools)  # the processor's template gets no tools=: the fallback block
        try:
            refs = [resolve_audio(clip_reference(ref), base, roots) for ref in references[index] + part_refs[index]]
            for ref in refs:
                audio_info(ref)  # the header: an unreadable or non-audio file is refused here
            messages = place_markers(messages, len(refs), MARKER, "audio clip")
        except RowError as exc:
            raise DatasetError(f"{source}, row {first_row + index}: {exc}") from None
        messages_out.append(messages)
        rows_audios.append(refs)
    rows = datasets.Dataset.from_dict({"messages": messages_out, "audios": rows_audios}, features=AUDIO_CHAT_FEATURES)
    return rows, notes
