"""A refused action (Start, Resume) said in the user's words: the refusal's request ``fields``
(``trainer_core.refusals.Refusal``, a ``Refused``, a pydantic error's locations) are listed for
marking and their names in the message become the labels on screen; the message becomes an HTML
notice shown beside the button until the next action. No field is guessed from the text.

The marking itself is done in the browser (``ui.page_assets``): it reads ``data-fields`` of the
notice and outlines those widgets, opening the form section that holds them.
"""

from __future__ import annotations

import html
import re
from collections.abc import Iterable
from dataclasses import dataclass
from functools import lru_cache
from typing import Optional

import gradio as gr

from trainer_core.fieldmeta import FIELDS, group
from trainer_core.refusals import as_refusal
from trainer_core.request.sections import SECTIONS

# The sections a refusal names beside a field's label: those closed on the page (the model's main
# fields and the training method are in view; Model options opens without being named).
SECTION_TITLES = {key: section.form for key, section in SECTIONS.items() if key not in ("model", "method")}
# The model fields always on screen (in a row); the model group's others are in Model options.
MODEL_FIRST = ("model_name", "training_type", "max_seq_length")
# The dataset fields are two widgets each (an upload and a path box); elem ids set in ui.train_widgets.
FILE_WIDGETS = {
    "local_datasets": ("Training dataset", ("train-upload", "train-paths")),
    "local_eval_datasets": ("Evaluation dataset", ("eval-upload", "eval-paths")),
}


def label_of(name: str) -> str:
    """The on-screen label of request field ``name`` (its schema title, else the name in words)."""
    if name in FILE_WIDGETS:
        return FILE_WIDGETS[name][0]
    return FIELDS[name].title or name.replace("_", " ").capitalize()


def widget_ids(name: str) -> tuple[str, ...]:
    """The element ids of the widgets that hold field ``name``."""
    return FILE_WIDGETS[name][1] if name in FILE_WIDGETS else (f"field-{name}",)


def _where(name: str) -> str:
    """The label, with the closed section that holds the field (the model group is always open)."""
    section = SECTION_TITLES.get(group(name)) if name not in FILE_WIDGETS else None
    return f"{label_of(name)} ({section})" if section else label_of(name)


# How a field's name is found in the text it is replaced in: a name with an underscore anywhere; a
# one-word name (``packing``, ``subset``) only where a message uses it as a field: ``name:``,
# ``name=`` or quoted. Never inside a path or file name (``/data/learning_rate/x.json`` stays as typed).
def _name_pattern(name: str) -> str:
    if "_" in name:
        return rf"(?<![\w/\\.-]){re.escape(name)}(?![\w/\\-]|\.\w)"
    return rf"(?<![\w'`/\\.-]){re.escape(name)}(?=\s*[:=])|['`]{re.escape(name)}['`]"


@lru_cache(maxsize=256)
def _names_in_text(fields: tuple[str, ...]) -> re.Pattern:
    """The pattern of ``fields``'s names (longest first), for ``describe``'s label swap."""
    return re.compile("|".join(_name_pattern(n) for n in sorted(fields, key=len, reverse=True)))


_MARKDOWN_SPECIAL = re.compile(r"([\\`*_\[\]<>#|~!])")


@dataclass(frozen=True)
class Notice:
    """``text``: the message with its fields' names replaced by their labels; ``fields``: the
    request fields it concerns (their widgets get marked)."""

    text: str
    fields: tuple[str, ...]

    @property
    def element_ids(self) -> tuple[str, ...]:
        """Ids of every widget to mark."""
        return tuple(i for name in self.fields for i in widget_ids(name))

    @property
    def section_ids(self) -> tuple[str, ...]:
        """Ids of the form sections (accordions) that hold the marked widgets, to open them."""
        groups = dict.fromkeys(group(n) for n in self.fields if n not in FILE_WIDGETS and n not in MODEL_FIRST)
        return tuple(f"section-{g}" for g in groups if g in SECTION_TITLES or g == "model")  # model: its options

    def html(self, action: str = "Not started") -> str:
        """The notice: a role=alert box whose ``data-fields`` lists the widget ids to mark and
        ``data-sections`` the form sections to open. The text is escaped (it may quote a user's
        path or value)."""
        ids, sections = " ".join(self.element_ids), " ".join(self.section_ids)
        return (
            f'<div class="refusal" role="alert" data-fields="{html.escape(ids)}" '
            f'data-sections="{html.escape(sections)}"><strong>{html.escape(action)}:</strong> '
            f"{html.escape(self.text)}</div>"
        )


def message_and_fields(refusal: BaseException | str) -> tuple[str, tuple[str, ...]]:
    """The message and request fields of ``refusal``: an engine ``Refusal`` or a ``Refused`` (its
    own fields), a pydantic ``ValidationError`` (``refusals.from_validation``), any other error
    (another ``gr.Error`` included) or a plain message (no fields)."""
    if isinstance(refusal, gr.Error):
        return refusal.message, tuple(getattr(refusal, "fields", ()))
    found = as_refusal(refusal) if isinstance(refusal, BaseException) else None
    if found is not None:
        return str(found), found.fields
    return str(refusal), ()


def describe(refusal: BaseException | str, fields: Optional[Iterable[str]] = None) -> Notice:
    """``refusal`` (see ``message_and_fields``) in the page's words: the request fields it concerns
    (``fields`` when given, else its own; only those of the Train form) are listed for marking, and
    each of their names in the message becomes "Label (Section)". No field is read from the text."""
    message, own = message_and_fields(refusal)
    names = tuple(n for n in (own if fields is None else fields) if n in FIELDS or n in FILE_WIDGETS)
    text = message.removeprefix("settings: ")  # a whole-request problem, said plainly
    if names:
        text = _names_in_text(names).sub(lambda match: _where(match.group(0).strip("'`")), text)
    return Notice(text=text, fields=tuple(dict.fromkeys(names)))


def markdown_text(text: str) -> str:
    """``text`` (a file name, a path, an error quoting user data) shown literally in Markdown or a
    toast: HTML escaped and Markdown's special characters backslash-escaped, so a name such as
    ``[x](https://evil)`` or ``<img ...>`` is text, not a link or markup."""
    return _MARKDOWN_SPECIAL.sub(r"\\\1", html.escape(text, quote=False))


def notice_html(refusal: BaseException | str, action: str = "Not started") -> str:
    """The HTML notice of ``refusal`` (a refusal, an error or a message; see ``describe``), headed by
    ``action``."""
    return describe(refusal).html(action)


__all__ = [
    "MODEL_FIRST",
    "Notice",
    "describe",
    "label_of",
    "markdown_text",
    "message_and_fields",
    "notice_html",
    "widget_ids",
]
