"""The Chat tab's Send as the page runs it (``PageSend``): one answer at a time per page, and a
stream that leaves the Message box alone. The box is emptied once, when the message is taken (the
send's first step); the stream's later steps never write it, nor the notice beside Send, so what the
user types while an answer is being written stays as typed. A Send while this page's answer is being
written is refused beside Send (``BUSY``) and its message stays in its box. What the send left to do
(``Outcome``: empty the image and clip boxes, or put an unsent message back) is done by
``after_send``, which puts a message back only into an empty box."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from typing import Any, Optional

import gradio as gr

from trainer_core.settings import Settings
from ui import chat_audio, chat_images
from ui.chat_checks import notice

BUSY = (
    "Not sent while the answer above was being written: your message stays in its box. Press Send again "
    "when the answer ends, or Stop generation first."
)
MESSAGE, NOTICE, IMAGES, CLIPS = 0, 4, 5, 6  # where the senders' outputs hold these
OUTPUTS = 7  # the senders' outputs: message, chat, base chat, load state, notice, images, clips

Outcome = Optional[dict[str, Any]]  # {"taken", "image", "clip"} or {"taken", "restore"}; None: nothing to do


class PageStreams:
    """The pages (Gradio session hashes) whose answer is being written, shared by every event of
    one Chat tab; ``refused``: the pages that were refused a Send meanwhile (their notice stays)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._writing: set[str] = set()
        self._refused: set[str] = set()

    def claim(self, page: str) -> bool:
        """True when ``page`` had no answer being written (it has one now); False, marking the page
        refused, otherwise."""
        with self._lock:
            if page in self._writing:
                self._refused.add(page)
                return False
            self._writing.add(page)
            self._refused.discard(page)
            return True

    def release(self, page: str) -> bool:
        """End ``page``'s answer; True when a Send was refused while it was being written."""
        with self._lock:
            self._writing.discard(page)
            refused = page in self._refused
            self._refused.discard(page)
            return refused


class PageSend:
    """``talk`` (``chat_send.send``'s inputs and outputs) run for one page at a time, as the event
    handler of Send and Enter (``send``, a method: Gradio passes the ``gr.Request`` to an annotated
    parameter of a function or method, not of a ``functools.partial``, and streams a generator
    function's steps, not a callable object's)."""

    def __init__(self, talk: Callable[..., Iterator[tuple]], streams: Optional[PageStreams] = None) -> None:
        self.talk = talk
        self.streams = streams or PageStreams()

    def send(self, request: gr.Request, *inputs: Any) -> Iterator[tuple]:
        """``talk(*inputs)``'s outputs, then the ``Outcome``. The first step passes the Message box
        and the notice through (emptied for a taken message, the message kept on a refusal); later
        steps skip them, except that the last one repeats the notice unless a Send was refused
        meanwhile (that refusal stays shown). A page already writing an answer gets ``BUSY`` and
        nothing else changes."""
        page = getattr(request, "session_hash", None)
        if page and not self.streams.claim(page):
            yield (*[gr.skip()] * NOTICE, notice(BUSY), *[gr.skip()] * (OUTPUTS - NOTICE - 1), gr.skip())
            return
        refused_meanwhile, last, steps = False, None, 0
        try:
            for last in self.talk(*inputs):
                steps += 1
                yield (*_shown(last, steps == 1), gr.skip())
        finally:
            if page:
                refused_meanwhile = self.streams.release(page)
        if last is None:
            return
        final = list(_shown(last, steps == 1))
        final[NOTICE] = gr.skip() if refused_meanwhile else last[NOTICE]
        yield (*final, _outcome(last, steps == 1))


def _shown(outputs: tuple, first: bool) -> tuple:
    """A sender's outputs as the page shows them: the Message box and notice only at the first step
    (a later non-empty notice too: a refusal that cut the answer short)."""
    shown = list(outputs)
    if not first:
        shown[MESSAGE] = gr.skip()
        shown[NOTICE] = outputs[NOTICE] if outputs[NOTICE] else gr.skip()
    return tuple(shown)


def _outcome(last: tuple, first: bool) -> dict[str, Any]:
    """What the send left to do, from its last outputs: taken (no notice; with the image and clip
    it took, the last of the earlier turns' images and clips), or refused with the message to put
    back (a refusal after the first step that took the turn back)."""
    if not last[NOTICE]:
        return {"taken": True, "image": _newest(last[IMAGES]), "clip": _newest(last[CLIPS])}
    restore = last[MESSAGE] if not first and isinstance(last[MESSAGE], str) else ""
    return {"taken": False, "restore": restore}


def _newest(items: Any) -> Optional[str]:
    return items[-1] if isinstance(items, list) and items and isinstance(items[-1], str) else None


def after_send(settings: Settings, outcome: Outcome, text: Any, picture: Any, clip: Any) -> tuple:
    """(image box, clip box, Message box, outcome) after a send: the image and clip boxes emptied
    when they still hold what the turn took (not one put there while the answer was written), kept
    otherwise (a refusal, or a send cut short after part of its answer); an unsent message put back
    only into an empty Message box (never over what the user typed meanwhile); the outcome cleared.
    A box already empty is left alone (emptying it again would run its change event, which clears
    the notice)."""
    if not outcome:
        return gr.skip(), gr.skip(), gr.skip(), gr.skip()
    if outcome.get("taken"):
        image = None if picture is not None and chat_images.taken(picture) == outcome.get("image") else gr.skip()
        audio = None if clip is not None and chat_audio.taken(settings, clip) == outcome.get("clip") else gr.skip()
        return image, audio, gr.skip(), None
    restore = outcome.get("restore") or ""
    empty = not (isinstance(text, str) and text.strip())
    return gr.skip(), gr.skip(), (restore if restore and empty else gr.skip()), None
