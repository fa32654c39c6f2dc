"""Why a chat request is refused; the chat tab shows the message, the OpenAI routes answer with it.

``ChatUnavailable``: nothing is wrong with the request, but chat cannot run now (a training job has
the machine, the chat model's process died, it was unloaded meanwhile). ``ChatInputError``: the
request itself cannot be served (a run without weights, a deleted folder, an adapter on another
base, a prompt longer than the model's context, malformed messages); ``UnknownModel`` is the
``ChatInputError`` for an id that names nothing.
"""

from __future__ import annotations

TRAINING_BUSY = "A training job is running and has the machine; chat again when it ends (or stop it)."


class ChatUnavailable(RuntimeError):
    """Chat is refused now (not the request's fault); the message says why and what to do."""


class ChatInputError(ValueError):
    """The request cannot be served: the message names what is wrong and the fix."""


class UnknownModel(ChatInputError):
    """No model, run or checkpoint has this id."""
