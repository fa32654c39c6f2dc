"""The checks of a Chat tab turn (a message, or tool results) before anything moves: a model chosen
and usable, the generation settings within their bounds, Base vs tuned possible, the machine free
(no training job), the Tools box usable (``chat_tools``); each refusal a ``Refused`` naming the
field by its label, said beside Send (``notice``)."""

from __future__ import annotations

from typing import Any, Optional, Union

from trainer_core.serving.engine import ChatEngine, ChatInputError
from trainer_core.serving.schemas import BASE_MODEL_ID, GenerationSettings, ModelChoice
from ui import chat_tools
from ui.refusals import notice_html
from ui.refused import Refused

SETTINGS_FIELDS = tuple(GenerationSettings.model_fields)
STATES = 4  # the page's states after the generation settings: held image, images, held clip, clips
TOOLS_AT = len(SETTINGS_FIELDS) + STATES + 1  # after the states and the voice: the Tools box and Tool choice
MODEL_LABEL = "Model"


def choice_of(engine: ChatEngine, model_id: str) -> ModelChoice:
    """The choice ``model_id`` names; Refused naming the Model box when it names nothing usable."""
    try:
        return engine.resolve(model_id)
    except ChatInputError as exc:
        raise Refused(f"{MODEL_LABEL}: {exc}") from None


def settings_from(values: tuple) -> GenerationSettings:
    """The generation settings widgets' values -> ``GenerationSettings`` (field-named errors)."""
    from pydantic import ValidationError

    from trainer_core.refusals import explain

    try:
        data = {name: value for name, value in zip(SETTINGS_FIELDS, values) if value is not None}
        return GenerationSettings(**data)
    except ValidationError as exc:
        raise Refused(explain(exc)) from None


def checked_send(
    engine: ChatEngine, model_id: Any, compare: bool, message: Any, values: tuple, clip: Optional[str] = None
) -> GenerationSettings:
    """The settings of a send that can go ahead; Refused naming the field (by its label) otherwise.
    The message may be empty when the turn has a ``clip``. Asks the engine first whether chat can
    run now, so a refused send changes nothing on the page."""
    _chosen(model_id)
    if not isinstance(message, str) or not (message.strip() or clip):
        raise Refused("Message: type something to send.")
    return checked_turn(engine, model_id, compare, values)


def tool_settings(values: tuple) -> chat_tools.ToolSettings:
    """The Tools box and Tool choice of a send's ``values`` (``TOOLS_AT``) checked; none (a plain
    chat) where the call has no such values."""
    text, choice = [*values[TOOLS_AT : TOOLS_AT + 2], "", "auto"][:2]
    return chat_tools.checked(text or "", choice or "auto")


def _chosen(model_id: Any) -> None:
    if not model_id or not isinstance(model_id, str):
        raise Refused(f"{MODEL_LABEL}: choose a model to talk to.")


def checked_turn(engine: ChatEngine, model_id: Any, compare: bool, values: tuple) -> GenerationSettings:
    """The generation settings of a turn (a message or tool results) for ``model_id`` that can go
    ahead now; Refused naming the field otherwise (``checked_send``)."""
    _chosen(model_id)
    settings = settings_from(values)
    if compare and model_id == BASE_MODEL_ID:
        raise Refused("Base vs tuned: choose a run or checkpoint to compare with its base model.")
    if compare and choice_of(engine, model_id).kind == "gguf":
        raise Refused(
            "Base vs tuned: a GGUF export holds only the tuned weights; untick it to chat with the GGUF, "
            "or choose the run it was exported from to compare with its base model."
        )
    choice_of(engine, model_id)  # an unknown id, a run without weights: said before anything moves
    problem = engine.refusal()
    if problem:
        raise Refused(problem)
    return settings


def notice(why: Union[BaseException, str]) -> str:
    """A refusal (its message: a ``Refused``'s without the quotes ``str`` gives it) as the notice
    shown beside Send."""
    return notice_html(why.message if isinstance(why, Refused) else str(why), "Not sent")
