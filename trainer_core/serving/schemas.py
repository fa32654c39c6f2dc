"""Models shared by the chat tab, the OpenAI-compatible routes, share links and the CLI's ``chat``.

Every generation setting carries its description, default and bounds once, here (as the training
request's fields do in their groups, ``trainer_core.request``); the UI builds its widgets from them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal, Optional

from pydantic import BaseModel, ConfigDict, Field, field_validator

from trainer_core.vocabulary import WholeNumber

MAX_MESSAGE_CHARS = 100_000
BASE_MODEL_ID = "base"


class GenerationSettings(BaseModel):
    """Sampling settings (transformers' ``GenerationConfig`` names). ``temperature`` 0 means greedy
    decoding (top_p / top_k are then unused)."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    max_new_tokens: WholeNumber = Field(256, ge=1, le=4096, description="Longest answer, in tokens.")
    temperature: float = Field(
        0.7, ge=0, le=2, description="Sampling temperature; 0 = greedy (always the likeliest token)."
    )
    top_p: float = Field(
        0.9,
        gt=0,
        le=1,
        description="Nucleus sampling: keep the smallest set of tokens whose probability adds up to top_p.",
    )
    top_k: WholeNumber = Field(50, ge=0, le=1000, description="Keep only the top_k likeliest tokens; 0 = no limit.")
    repetition_penalty: float = Field(
        1.0, ge=0.5, le=2.0, description="Above 1 discourages repeating tokens (1 = off)."
    )
    seed: WholeNumber = Field(
        42, ge=0, le=2**32 - 1, description="Random seed; the same seed and settings give the same answer."
    )


MAX_IMAGES = 8  # images in one conversation
MAX_IMAGE_URL_CHARS = 20_000_000  # a base64 data: URL of about 15 MB
MAX_AUDIOS = 8  # audio clips in one conversation
MAX_AUDIO_URL_CHARS = 20_000_000  # a base64 data: URL of about 15 MB (a 30 s 16-bit 48 kHz stereo wav is 5.8 MB)


class ChatMessage(BaseModel):
    """One turn of a conversation, in our canonical form for tools (``tools.render``: an assistant's
    calls are Hermes blocks in its text, a ``tool`` turn is a result in ``<tool_response>``). ``images``: for a vision-language model, the turn's images as
    ``data:image/...;base64,`` URLs, shown where the content has ``<image>`` markers (one each) or
    else before its text; ``audios``: for an audio-in chat model, its clips as ``data:audio/...;base64,``
    URLs, placed the same way by ``<audio>`` markers."""

    model_config = ConfigDict(extra="forbid")

    role: Literal["system", "user", "assistant", "tool"]
    content: str = Field(max_length=MAX_MESSAGE_CHARS)
    images: list[str] = Field(
        default_factory=list,
        max_length=MAX_IMAGES,
        description="The turn's images as data: URLs (vision-language models only).",
    )

    audios: list[str] = Field(
        default_factory=list,
        max_length=MAX_AUDIOS,
        description="The turn's audio clips as data: URLs (audio-in chat models only).",
    )

    @field_validator("audios")
    @classmethod
    def _audio_urls(cls, audios: list[str]) -> list[str]:
        for audio in audios:
            if not audio.startswith("data:audio/") or ";base64," not in audio[:100]:
                raise ValueError("each audio clip must be a data:audio/...;base64,... URL")
            if len(audio) > MAX_AUDIO_URL_CHARS:
                raise ValueError(f"an audio data: URL may be at most {MAX_AUDIO_URL_CHARS:,} characters")
        return audios

    @field_validator("images")
    @classmethod
    def _data_urls(cls, images: list[str]) -> list[str]:
        for image in images:
            if not image.startswith("data:image/") or ";base64," not in image[:100]:
                raise ValueError("each image must be a data:image/...;base64,... URL")
            if len(image) > MAX_IMAGE_URL_CHARS:
                raise ValueError(f"an image data: URL may be at most {MAX_IMAGE_URL_CHARS:,} characters")
        return images


class ModelChoice(BaseModel):
    """Something to talk to: ``id`` is ``base``, a job id (the run's final weights),
    ``JOB_ID/checkpoint-N``, ``EXPORT_TASK_ID/TYPE`` (a GGUF file an export wrote, run by
    llama.cpp) or ``EXPORT_TASK_ID`` (a merged export, kind ``merged``; ``tasks.export_models``).
    ``path`` is the weights folder, or the ``.gguf`` file
    (None for ``base``: the base model is loaded by name); ``adapter`` says the folder holds a PEFT
    adapter on ``base_model``."""

    id: str
    label: str
    kind: Literal["base", "final", "checkpoint", "gguf", "merged"]
    base_model: str
    path: Optional[str] = None
    job_id: Optional[str] = None
    step: Optional[int] = None
    loss: Optional[float] = None
    adapter: bool = False
    created_at: Optional[float] = None
    gguf_type: Optional[str] = Field(None, description="For a GGUF export: its type, e.g. q4_k_m.")
    serves: Literal["chat", "embeddings", "transcriptions", "speech"] = Field(
        "chat",
        description="What it answers: chat, embeddings (an embedding model: POST /v1/embeddings), transcriptions "
        "(a speech-to-text model: POST /v1/audio/transcriptions) or speech (a text-to-speech model: POST "
        "/v1/audio/speech).",
    )
    query_prompt: Optional[str] = Field(
        None, description="An embedding run's query_prompt: the text its searches put before each query."
    )


class StreamEvent(BaseModel):
    """One piece of a streamed answer: ``delta`` text, and on the last event ``finish_reason``
    (``stop``: end-of-turn token; ``length``: max_new_tokens reached; ``cancelled``: Stop
    generation) with the token counts."""

    delta: str = ""
    finish_reason: Optional[Literal["stop", "length", "cancelled"]] = None
    prompt_tokens: Optional[int] = None
    completion_tokens: Optional[int] = None
    tool_calls: Optional[list[dict[str, Any]]] = Field(
        None, description="On the last event of an answer with tools: its calls (``tools.parse.openai_call``'s)."
    )


MAX_EMBEDDING_INPUTS = 2048  # texts in one embeddings request (OpenAI's bound)
MAX_EMBEDDING_INPUT_CHARS = 32_768  # characters in one text; the model truncates to its max_seq_length tokens
MAX_EMBEDDING_DIMENSIONS = 65_536  # the largest ``dimensions`` a request may name (the model's own size bounds it too)


@dataclass
class Embeddings:
    """The vectors of one embeddings request: ``vectors`` a float32 numpy array (N, D), rows of
    unit length (cut to ``dimensions`` and re-normalised where asked), and ``prompt_tokens``, the
    tokens the model read (special tokens included, after truncation)."""

    vectors: Any
    prompt_tokens: int


@dataclass
class Transcription:
    """The transcript of one clip: ``text`` (special tokens left out), ``language`` (the one asked
    or the run's; None: detected by the model), ``duration`` (seconds of audio) and ``tokens`` (the
    decoder tokens generated, its prompt included)."""

    text: str
    language: Optional[str]
    duration: float
    tokens: int


@dataclass
class Speech:
    """The speech of one text: ``samples`` a float32 numpy array (samples,) in [-1, 1] at
    ``sampling_rate`` Hz (the codec's), ``seconds`` = samples / rate, ``frames`` the codec frames
    generated."""

    samples: Any
    sampling_rate: int
    seconds: float
    frames: int
