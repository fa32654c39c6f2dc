"""Audio in the data, for speech and audio models: whether the data holds audio clips, the rate and
length they are read at, Whisper's language / task / timestamps, a text-to-speech speaker column and an Orpheus model's codec
(fields the form shows only for a model that reads or speaks audio; the opener is
``trainer_core.data.audio``)."""

from __future__ import annotations

from typing import Literal, Optional

from pydantic import Field, field_validator

from trainer_core.request.base import FieldGroup, blank_is_none, in_section
from trainer_core.vocabulary import OptionalWholeNumber

DEFAULT_MAX_SECONDS = 30.0  # the longest clip by default: Whisper hears 30 s at a time
MAX_AUDIO_SECONDS = 600.0  # the longest clip a run may allow (10 minutes)
SNAC_24KHZ = "hubertsiuzdak/snac_24khz"  # Orpheus' codec (24 kHz, 3 levels of 4096 codes)


class AudioFields(FieldGroup):
    """The audio fields: ``is_dataset_audio`` in section ``data`` (as ``is_dataset_image``), the rest
    in section ``audio`` (``audio`` in their metadata: shown for audio models)."""

    is_dataset_audio: Optional[bool] = Field(
        None,
        title="Data has audio",
        description=(
            "Empty: found from the data (an audios column, a Hub Audio column, input_audio content parts or an audio "
            "column of clip files). On: the data must hold audio clips (refused when no row has one). Off: rows with "
            "audio are refused. Audio needs a speech-to-text model (Whisper), an audio chat model (Qwen2-Audio) or a "
            "text-to-speech model (CSM)."
        ),
        json_schema_extra=in_section("data", audio=True),
    )
    sampling_rate: OptionalWholeNumber = Field(
        None,
        ge=8000,
        le=48000,
        title="Sampling rate (Hz)",
        description=(
            "The rate every clip is resampled to before the model's feature extractor sees it. Empty: the feature "
            "extractor's own (16,000 Hz for Whisper and Qwen2-Audio, 24,000 Hz for CSM's Mimi codec); a model "
            "trained at one rate hears another badly, so change it only for a model that was."
        ),
        json_schema_extra=in_section("audio", audio=True),
    )
    max_audio_seconds: float = Field(
        DEFAULT_MAX_SECONDS,
        gt=0,
        le=MAX_AUDIO_SECONDS,
        title="Longest clip (s)",
        description=(
            "Clips longer than this are refused by file and row at Check and Start (cut them, or raise this). Whisper "
            "hears 30 s at a time."
        ),
        json_schema_extra=in_section("audio", audio=True),
    )
    language: Optional[str] = Field(
        None,
        max_length=40,
        title="Language",
        description=(
            'Speech-to-text (Whisper): the language spoken in the clips, as Whisper names it ("en", "english", '
            '"de", ...); its token starts every transcript. Empty: none (Whisper guesses).'
        ),
        json_schema_extra=in_section("audio", audio=True),
    )
    task: Optional[Literal["transcribe", "translate"]] = Field(
        None,
        title="Task",
        description=(
            "Speech-to-text (Whisper): transcribe (text in the spoken language) or translate (English text). "
            "Empty: transcribe."
        ),
        json_schema_extra=in_section("audio", audio=True),
    )
    return_timestamps: bool = Field(
        False,
        title="Timestamps",
        description="Speech-to-text (Whisper): train and transcribe with timestamp tokens. Off: <|notimestamps|>.",
        json_schema_extra=in_section("audio", audio=True),
    )
    speaker_column: Optional[str] = Field(
        None,
        max_length=200,
        title="Speaker column",
        description=(
            "Text-to-speech (CSM): the data column naming each row's speaker (a whole number: the voice id the model "
            "learns, said again in POST /v1/audio/speech's voice). Empty: a column named speaker if the data has one, "
            "else speaker 0 for every row."
        ),
        json_schema_extra=in_section("audio", audio=True),
    )

    audio_codec: str = Field(
        SNAC_24KHZ,
        min_length=1,
        max_length=300,
        title="Audio codec",
        description=(
            "Text-to-speech (Orpheus): the SNAC codec whose codes the model speaks, a local folder (config.json and "
            "pytorch_model.bin, as SNAC.from_pretrained reads it) in the allowed folders or a Hub id already in the "
            "Hub cache (never downloaded). Its codes are the training targets and decode the model's speech."
        ),
        json_schema_extra=in_section("audio", audio=True),
    )

    @field_validator("language", "speaker_column")
    @classmethod
    def _blank(cls, value: Optional[str]) -> Optional[str]:
        """Blank is not set."""
        return blank_is_none(value)
