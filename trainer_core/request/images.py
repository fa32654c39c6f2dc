"""Images in the data, for vision-language models: whether the data holds images and the size the
model's processor sees them at (fields the form shows only for a model that reads images)."""

from __future__ import annotations

from typing import Optional

from pydantic import Field

from trainer_core.request.base import FieldGroup, in_section
from trainer_core.vocabulary import OptionalWholeNumber


class ImageFields(FieldGroup):
    """The image fields (section ``data``, ``vision`` in their metadata)."""

    is_dataset_image: Optional[bool] = Field(
        None,
        title="Data has images",
        description=(
            "Empty: found from the data (an images column, a Hub Image column or image content parts). On: the data "
            "must hold images (refused when no row has one). Off: rows with images are refused. Images need a "
            "vision-language model (Qwen2-VL, Qwen2.5-VL, Gemma 3, SmolVLM, LLaVA, ...)."
        ),
        json_schema_extra=in_section("data", vision=True),
    )
    vision_image_size: OptionalWholeNumber = Field(
        None,
        ge=28,
        le=4096,
        title="Image size (px, longest side)",
        description=(
            "Vision models: each image is shrunk so that its longest side is at most this many pixels before the "
            "model's processor sees it (fewer image tokens for models that read images at their own size, such as "
            "Qwen2-VL); empty: as the files are, within the processor's own pixel budget."
        ),
        json_schema_extra=in_section("data", vision=True),
    )
