"""The engine's one-answer requests (``ChatEngine.embed`` / ``transcribe`` / ``speak``): each names a
model that ``serves`` them (``ModelChoice.serves``: embeddings, transcriptions, speech), is refused
naming the field ``model`` for any other, and gets the worker's ``done`` payload as its typed answer.
The engine gives ``_served`` (training refused, the id resolved) and ``_ask`` (the model loaded on
demand, one command in its turn)."""

from __future__ import annotations

from typing import Optional, Union

from trainer_core.serving.errors import EMBED_BUSY, ChatInputError
from trainer_core.serving.inputs import checked_inputs
from trainer_core.serving.schemas import Embeddings, ModelChoice, Speech, Transcription

# serves -> (what such a model is, the verb its users say, the refusal's code for another model)
SERVES = {
    "embeddings": ("an embedding model", "embed", "not_an_embedding_model"),
    "transcriptions": ("a speech-to-text model", "transcribe", "not_a_speech_to_text_model"),
    "speech": ("a text-to-speech model", "speak", "not_a_text_to_speech_model"),
}


def refuse_other(model_id: str, choice: ModelChoice, serves: str) -> None:
    """Raise ChatInputError (field ``model``, the ``SERVES`` code) when ``choice`` does not serve
    ``serves``, naming what it serves and how to find one that does."""
    if choice.serves != serves:
        what, verb, code = SERVES[serves]
        raise ChatInputError(
            f"{model_id}: a {choice.serves} model, not {what}; {verb} with one that GET /v1/models lists with "
            f'"serves": "{serves}"',
            fields=("model",),
            code=code,
        )


def refuse_whole_weights(model_id: str, choice: ModelChoice, use_adapter: bool) -> None:
    """Raise ChatInputError (field ``model``, code ``no_adapter_to_switch_off``) when the base model
    is asked of whole weights (a full fine-tune or a merged export): the loaded model holds no base
    to switch to, and its own answer would pass for the base's."""
    if not use_adapter and choice.path and not choice.adapter:
        raise ChatInputError(
            f"{model_id}: whole weights (a full fine-tune or a merged export), not a LoRA adapter on its base: "
            "there is no adapter to switch off; choose the base model itself",
            fields=("model",),
            code="no_adapter_to_switch_off",
        )


class OneAnswerRequests:
    """``embed``, ``transcribe`` and ``speak`` of ``ChatEngine`` (a base of it), over its
    ``_served(model_id, busy)`` -> ModelChoice and ``_ask(choice, request)`` -> the worker's ``done``
    payload."""

    def embed(
        self, model_id: str, texts: list[str], dimensions: Optional[int] = None, use_adapter: bool = True
    ) -> Embeddings:
        """The unit-length vectors of ``texts`` (N, D) from embedding model ``model_id``, cut to
        ``dimensions`` and re-normalised where given, and the tokens read; ``use_adapter=False``: its
        base model's (see ``stream``). Loads the model on demand and waits for its turn. Raises
        ChatUnavailable, UnknownModel, or ChatInputError (a chat model; no texts, too many, an empty
        or too long one: ``fields`` ``input``; ``dimensions`` above the model's size)."""
        choice = self._served(model_id, "embeddings", EMBED_BUSY)
        request = {"input": checked_inputs(texts), "dimensions": dimensions, "use_adapter": use_adapter}
        done = self._ask(choice, request)
        return Embeddings(vectors=done["vectors"], prompt_tokens=done["prompt_tokens"])

    def transcribe(
        self,
        model_id: str,
        audio: str,
        language: Optional[str] = None,
        task: Optional[str] = None,
        use_adapter: bool = True,
    ) -> Transcription:
        """The transcript of ``audio`` (a ``data:`` URL or a confined path) by speech-to-text model
        ``model_id`` in ``language`` / ``task`` (None: the run's own, else detected / transcribe);
        ``use_adapter=False``: a LoRA run's base model's (the adapter switched off; ignored for
        ``base``). Loads the model on demand and waits for its turn. Raises ChatUnavailable,
        UnknownModel, or ChatInputError (not a speech-to-text model: ``fields`` ``model``; the base
        of whole weights (``refuse_whole_weights``); audio that cannot be read: ``file``; an unknown
        ``language``)."""
        choice = self._served(model_id, "transcriptions")
        refuse_whole_weights(model_id, choice, use_adapter)
        done = self._ask(choice, {"audio": audio, "language": language, "task": task, "use_adapter": use_adapter})
        return Transcription(
            text=done["text"], language=done["language"], duration=done["duration"], tokens=done["tokens"]
        )

    def speak(self, model_id: str, text: str, voice: Union[int, str] = 0, use_adapter: bool = True) -> Speech:
        """The speech of ``text`` in voice ``voice`` (a speaker: CSM's number, an Orpheus-style run's
        name) by text-to-speech model ``model_id``; ``use_adapter=False``: its base model's (see
        ``stream``). Loads the model on demand and waits for its turn. Raises ChatUnavailable,
        UnknownModel, or ChatInputError (not a text-to-speech model: ``fields`` ``model``; the base of
        whole weights: ``refuse_whole_weights``; a voice the model has not: ``voice``)."""
        choice = self._served(model_id, "speech")
        refuse_whole_weights(model_id, choice, use_adapter)
        done = self._ask(choice, {"input": text, "voice": voice, "use_adapter": use_adapter})
        return Speech(
            samples=done["samples"], sampling_rate=done["sampling_rate"], seconds=done["seconds"], frames=done["frames"]
        )
