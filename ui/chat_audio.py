"""Audio clips in the Chat tab, for audio-in chat runs (Qwen2-Audio) and speech-to-text runs (Whisper):
the twin of ``chat_images``. The record / upload box is shown only while the chosen model hears audio
(``ChatEngine.reads_audio``); the clip, once recorded or uploaded, is checked (a file this server
received, as every upload: ``uploads.received_upload``; readable audio; at most ``MAX_SECONDS``
long) and turned into the ``data:`` URL the engine takes (a mono 16-bit WAV at the clip's own rate:
the model's processor resamples it), held in a ``gr.State`` until it is sent (so the ``/chat``
endpoint's parameters stay as they were); the clips of earlier turns are kept on the server in
another ``gr.State`` (one entry per user turn, None for a turn without one). The chat shows such a
turn with ``AUDIO_MARK`` and the clip's duration before its text (``with_clip``)."""

from __future__ import annotations

import base64
from typing import Any, Optional

import gradio as gr

from trainer_core.data.audio import audio_info, read_audio, wav_bytes
from trainer_core.data.errors import RowError
from trainer_core.request.audio import DEFAULT_MAX_SECONDS
from trainer_core.settings import Settings
from ui.refused import Refused
from ui.uploads import received_upload

AUDIO_LABEL = "Audio clip"
AUDIO_MARK = "🎤 "
MAX_SECONDS = DEFAULT_MAX_SECONDS  # the longest clip a chat turn takes (Whisper hears 30 s at a time)


def audio_box(engine: Any, model_id: Any) -> Any:
    """The record / upload box, visible when ``model_id`` hears audio (``ChatEngine.reads_audio``)."""
    shown = isinstance(model_id, str) and bool(model_id) and engine.reads_audio(model_id)
    return gr.update(visible=shown)


def pending(settings: Settings, clip: Any) -> tuple[Optional[str], str]:
    """(the recorded or uploaded clip's data: URL or None, the notice): a clip that is refused
    (``data_url``) is said beside Send and not held."""
    from ui.refusals import notice_html

    try:
        return data_url(clip, settings), ""
    except Refused as exc:
        return None, notice_html(str(exc), "Not taken")


def taken(settings: Settings, clip: Any) -> Optional[str]:
    """The clip's data: URL as a send takes it (None: no clip, or one refused, which ``pending``
    has already said is not taken)."""
    return pending(settings, clip)[0]


def data_url(clip: Any, settings: Settings) -> Optional[str]:
    """A ``data:audio/wav;base64,`` URL of the clip at path ``clip`` (the box's value; None: no
    clip): its samples as mono 16-bit WAV at the file's own rate. Raises Refused naming the box
    for a path this server did not receive (nothing is read then), a file that is no audio, or a
    clip over ``MAX_SECONDS`` (refused from its header, before it is decoded)."""
    if not clip:
        return None
    path = str(received_upload(clip if isinstance(clip, str) else str(clip), settings, AUDIO_LABEL))
    try:
        info = audio_info(path)
        if info.seconds > MAX_SECONDS:
            raise Refused(
                f"{AUDIO_LABEL}: {info.seconds:.1f} s is longer than the {MAX_SECONDS:g} s a chat clip may be; "
                "record or upload a shorter one"
            )
        samples = read_audio(path, sampling_rate=info.sampling_rate)  # (samples,) mono, not resampled
    except RowError as exc:
        raise Refused(f"{AUDIO_LABEL}: {exc}") from None
    return "data:audio/wav;base64," + base64.b64encode(wav_bytes(samples, info.sampling_rate)).decode("ascii")


def clip_words(clip: str) -> str:
    """What the chat shows for a held clip (a data: URL ``data_url`` made): ``AUDIO_MARK`` and its
    duration, e.g. "🎤 4.0 s"."""
    return f"{AUDIO_MARK}{audio_info(clip).seconds:.1f} s"


def with_clip(message: str, clip: Optional[str]) -> str:
    """A user turn's text as the chat shows it: ``clip_words`` before ``message`` when it has a
    clip (``message`` alone otherwise)."""
    if not clip:
        return message
    return clip_words(clip) + (f" {message}" if message else "")


def shown_text(content: str, clip: str) -> str:
    """A displayed user turn's own text (without what ``with_clip`` put before it)."""
    rest = content.removeprefix(clip_words(clip))
    return rest[1:] if rest.startswith(" ") else rest
