"""Kinds of model, one folder a kind, each behind the ``model_kind.ModelKind`` interface:
``embedding/`` (text-embedding models), ``speech_to_text/`` (Whisper), ``text_to_speech/`` (Sesame CSM),
``orpheus/`` (Orpheus-style LMs speaking SNAC codec codes), ``vision/`` (image-and-text models),
``audio_chat/`` (audio-in chat models) and ``causal/`` (the text LM, the fallback).

``KINDS`` are the built-in kinds, most specific first; the registry (``trainer_core.model_kind``)
reads them the first time a layer asks which kind a model is. Adding a kind: a new folder here
whose ``kind.py`` subclasses ``ModelKind``, and one entry in ``KINDS`` (docs/ARCHITECTURE.md).
"""

from trainer_core.kinds.audio_chat.kind import AUDIO_CHAT
from trainer_core.kinds.causal.kind import CAUSAL
from trainer_core.kinds.embedding.kind import EMBEDDING
from trainer_core.kinds.orpheus.kind import ORPHEUS
from trainer_core.kinds.speech_to_text.kind import SPEECH_TO_TEXT
from trainer_core.kinds.text_to_speech.kind import TEXT_TO_SPEECH
from trainer_core.kinds.vision.kind import VISION

KINDS = (EMBEDDING, SPEECH_TO_TEXT, TEXT_TO_SPEECH, ORPHEUS, VISION, AUDIO_CHAT, CAUSAL)
