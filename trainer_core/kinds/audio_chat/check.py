"""The check's line about an audio-in chat model and its clips: the family, the rate and length
limit clips are read with, and what the clips cost in tokens (counted with the model's processor
on the first ``SAMPLE_ROWS`` training rows: each clip read and processed once, as training does)."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Optional

from trainer_core.data.errors import DatasetError
from trainer_core.kinds.audio_chat.family import folder_family
from trainer_core.model_kind import ModelKind
from trainer_core.models.loading import ModelLoadError
from trainer_core.schemas import TrainingStartRequest
from trainer_core.settings import Settings
from trainer_core.vocabulary import TrainingMethod

log = logging.getLogger(__name__)
SAMPLE_ROWS = 64  # rows whose clips are read and processed for the check (~5 ms a second of audio on 2 cores)


def audio_chat_summary(
    request: TrainingStartRequest, settings: Settings, folder: Optional[Path], kind: ModelKind
) -> Optional[str]:
    """e.g. "audio chat: Qwen2-Audio; padded batches (audio rows are not packed); clips read at
    16000 Hz, at most 30 s each; in the first 3 rows: 3 clips, 12.8 s in all (2.9 to 5.9 s), 25
    tokens per second of audio; rows of 94 to 176 tokens with their clips"; None for a model of
    another kind or one not on this machine (``folder``). Data problems are left to the data check
    (reported there by file and row)."""
    family = folder_family(folder)
    if family is None:
        return None
    from trainer_core.kinds.audio_chat.prepare import AudioStats, audio_collator
    from trainer_core.kinds.audio_chat.processor import load_processor
    from trainer_core.models.loading import remote_code

    try:
        processor = load_processor(folder, **remote_code(folder, request))
        collator = audio_collator(processor, request)
    except (DatasetError, ModelLoadError) as exc:
        log.info("no clip counts for the check: %s", exc)
        return f"{kind.label}: {family.name}"
    limit = f"at most {request.max_audio_seconds:g} s each" if request.max_audio_seconds else "any length"
    line = (
        f"{kind.label}: {family.name}; padded batches (audio rows are not packed); clips read at "
        f"{collator.sampling_rate} Hz, {limit}"
    )
    if request.training_method != TrainingMethod.sft or request.hf_dataset:
        return line
    from trainer_core.data.media_prepare import prepare_media_rows
    from trainer_core.data.prepare import load_conversations

    try:
        rows, _ = load_conversations(request, kind=kind)
        if "audios" not in rows.column_names:
            return f"{line}; the data holds no audio"
        sample = rows.select(range(min(SAMPLE_ROWS, len(rows))))
        stats = AudioStats(collator.sampling_rate)
        prepare_media_rows(sample, collator, 1 << 30, stats)
    except DatasetError as exc:
        log.info("no clip counts for the check: %s", exc)
        return line
    lengths = f"; rows of {min(stats.lengths)} to {max(stats.lengths)} tokens with their clips" if stats.lengths else ""
    return f"{line}; in the first {len(sample)} rows: {stats.line()}{lengths}"
