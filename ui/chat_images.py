"""Images in the Chat tab, for vision-language runs: the upload box shown only while the chosen
model reads images; the picture, once uploaded, turned into the ``data:`` URL the engine takes
(within the pixel limit of ``data.images``) and held in a ``gr.State`` until it is sent (so the
``/chat`` endpoint's parameters stay as they were: API callers send text); the images of earlier
turns kept on the server in another ``gr.State`` (one entry per user turn, None for a turn
without one) so each send gives the model the whole conversation with its pictures. The chat
shows such a turn with ``IMAGE_MARK`` before its text."""

from __future__ import annotations

import base64
import io
from typing import Any, Optional

import gradio as gr

from trainer_core.data import images as image_files
from ui.refused import Refused

IMAGE_LABEL = "Image"
IMAGE_MARK = "🖼️ "


def image_box(engine: Any, model_id: Any) -> Any:
    """The upload box, visible when ``model_id`` reads images (``ChatEngine.reads_images``)."""
    shown = isinstance(model_id, str) and bool(model_id) and engine.reads_images(model_id)
    return gr.update(visible=shown)


def pending(picture: Any) -> tuple[Optional[str], str]:
    """(the uploaded picture's data: URL or None, the notice): a picture over the pixel limit is
    refused with a notice beside Send and not held."""
    from ui.refusals import notice_html

    try:
        return data_url(picture), ""
    except Refused as exc:
        return None, notice_html(str(exc), "Not taken")


def taken(picture: Any) -> Optional[str]:
    """The uploaded ``picture``'s data: URL as a send takes it (None: no picture, or one over the
    pixel limit, which ``pending`` has already said is not taken)."""
    return pending(picture)[0]


def data_url(picture: Any) -> Optional[str]:
    """A PNG ``data:`` URL of the uploaded ``picture`` (a PIL image; None: no image). Raises Refused
    naming the box for an image over ``data.images.MAX_PIXELS`` pixels."""
    if picture is None:
        return None
    width, height = picture.size
    if width * height > image_files.MAX_PIXELS:
        raise Refused(
            f"{IMAGE_LABEL}: {width} x {height} pixels is more than the limit of {image_files.MAX_PIXELS:,}; "
            "use a smaller image"
        )
    buffer = io.BytesIO()
    picture.convert("RGB").save(buffer, format="PNG")
    return "data:image/png;base64," + base64.b64encode(buffer.getvalue()).decode("ascii")


def user_turn(message: str, image: Optional[str]) -> dict:
    """The chat's display of a user turn (``IMAGE_MARK`` before the text when it has an image)."""
    return {"role": "user", "content": (IMAGE_MARK if image else "") + message}


def shown_text(content: str) -> str:
    """A displayed user turn's own text (without ``IMAGE_MARK``)."""
    return content.removeprefix(IMAGE_MARK)
