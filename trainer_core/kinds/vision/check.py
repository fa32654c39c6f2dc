"""The check's line about a vision-language model and its images: the family, the image size
training uses, and what the images cost in tokens (counted with the model's processor on the first
``SAMPLE_ROWS`` training rows: each image opened and processed once, as training does)."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Optional

from trainer_core.data.errors import DatasetError
from trainer_core.kinds.vision.family import folder_family
from trainer_core.model_kind import ModelKind
from trainer_core.models.loading import ModelLoadError
from trainer_core.schemas import TrainingStartRequest
from trainer_core.settings import Settings
from trainer_core.vocabulary import TrainingMethod

log = logging.getLogger(__name__)
SAMPLE_ROWS = 64  # rows whose images are processed for the check (~10 ms an image on 2 cores)


def vision_summary(
    request: TrainingStartRequest, settings: Settings, folder: Optional[Path], kind: ModelKind
) -> Optional[str]:
    """e.g. "vision-language: Qwen2-VL; images as the files are; in the first 6 rows: 8 images,
    300 x 166 to 300 x 199 px, 12 tokens each on average; rows of 70 to 240 tokens with their
    images"; None for a text-only model or one not on this machine (``folder``: where the model is,
    ``preview_tokenizer.local_model_folder``; ``kind``: the vision kind, whose rows are read). Data problems are left to the data check (they are
    reported there by file and row)."""
    family = folder_family(folder)
    if family is None:
        return None
    size = (
        f"images shrunk to at most {request.vision_image_size} px on their longest side"
        if request.vision_image_size
        else "images as the files are (within the processor's own pixel budget)"
    )
    line = f"{kind.label}: {family.name}; padded batches (image rows are not packed); {size}"
    if request.training_method != TrainingMethod.sft or request.hf_dataset:
        return line
    from trainer_core.data.prepare import load_conversations
    from trainer_core.kinds.vision.collator import VisionCollator
    from trainer_core.kinds.vision.prepare import prepare_vision_rows
    from trainer_core.kinds.vision.processor import load_processor
    from trainer_core.models.loading import remote_code

    try:
        processor = load_processor(folder, **remote_code(folder, request))
        rows, _ = load_conversations(request, kind=kind)
        if "images" not in rows.column_names:
            return f"{line}; the data holds no images"
        sample = rows.select(range(min(SAMPLE_ROWS, len(rows))))
        collator = VisionCollator(
            processor, request.max_seq_length, request.train_on_completions, request.vision_image_size
        )
        _, _, images = prepare_vision_rows(sample, collator, 1 << 30)
    except (DatasetError, ModelLoadError) as exc:
        log.info("no image counts for the check: %s", exc)
        return line
    lengths = f"; rows of {min(images.lengths)} to {max(images.lengths)} tokens with their images"
    return f"{line}; in the first {len(sample)} rows: {images.line()}{lengths if images.lengths else ''}"
