"""Why a chat request is refused; the chat tab shows the message, the OpenAI routes answer with it.

``ChatUnavailable``: nothing is wrong with the request, but chat cannot run now (a training job has
the machine, the chat model's process died, it was unloaded meanwhile). ``ChatInputError``: the
request itself cannot be served (a run without weights, a deleted folder, an adapter on another
base, a prompt longer than the model's context, malformed messages); ``UnknownModel`` is the
``ChatInputError`` for an id that names nothing.
"""

from __future__ import annotations

from trainer_core.refusals import Refusal

TRAINING_BUSY = "A training job is running and has the machine; chat again when it ends (or stop it)."
EMBED_BUSY = "A training job is running and has the machine; embed again when it ends (or stop it)."


class ChatUnavailable(Refusal, RuntimeError):
    """Chat is refused now (not the request's fault); the message says why and what to do."""

    code, status = "chat_unavailable", 409


class ChatInputError(Refusal):
    """The request cannot be served: the message names what is wrong and the fix."""

    code = "chat_input_invalid"


class UnknownModel(ChatInputError):
    """No model, run or checkpoint has this id."""

    code, status = "unknown_model", 404
