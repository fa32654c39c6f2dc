"""A refused action (Start, Resume) said in the user's words: the request field names inside an
engine message become the labels on screen, the widgets they name are listed for marking, and the
message becomes an HTML notice shown beside the button until the next action.

The marking itself is done in the browser (``ui.page_assets``): it reads ``data-fields`` of the
notice and outlines those widgets, opening the form section that holds them.
"""

from __future__ import annotations

import html
import re
from dataclasses import dataclass

from trainer_core.fieldmeta import FIELDS, group
from trainer_core.request.sections import SECTIONS
from ui.uploads import UPLOAD_LABEL

EVAL_UPLOAD_LABEL = "Evaluation dataset (upload, optional)"
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


_NAMES = sorted([*FIELDS, *FILE_WIDGETS], key=len, reverse=True)
# A name with an underscore is unmistakable anywhere; a one-word name (``packing``, ``subset``)
# only where a message uses it as a field: ``name:``, ``name=`` or quoted.
# Never inside a path or file name (``/data/learning_rate/x.json`` stays as typed).
_PATTERN = re.compile(
    "|".join(
        rf"(?<![\w/\\.-]){re.escape(n)}(?![\w/\\-]|\.\w)"
        if "_" in n
        else rf"(?<![\w'`/\\.-]){re.escape(n)}(?=\s*[:=])|['`]{re.escape(n)}['`]"
        for n in _NAMES
    )
)
_MARKDOWN_SPECIAL = re.compile(r"([\\`*_\[\]<>#|~!])")
_UPLOADS = {UPLOAD_LABEL: "local_datasets", EVAL_UPLOAD_LABEL: "local_eval_datasets"}


@dataclass(frozen=True)
class Refusal:
    """``text``: the message with field names replaced by their labels; ``fields``: the request
    fields it names, in order of appearance (their widgets get marked)."""

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


def describe(message: str) -> Refusal:
    """``message`` (an engine or validation error) in the page's words. Each request field name it
    contains becomes "Label (Section)" and is collected; an upload field's label counts as its field."""
    found: list[str] = []

    def swap(match: re.Match) -> str:
        name = match.group(0).strip("'`")
        if name not in found:
            found.append(name)
        return _where(name)

    text = _PATTERN.sub(swap, message.removeprefix("settings: "))  # a whole-request problem, said plainly
    for label, name in _UPLOADS.items():
        if label in text and name not in found:
            found.append(name)
    return Refusal(text=text, fields=tuple(found))


def markdown_text(text: str) -> str:
    """``text`` (a file name, a path, an error quoting user data) shown literally in Markdown or a
    toast: HTML escaped and Markdown's special characters backslash-escaped, so a name such as
    ``[x](https://evil)`` or ``<img ...>`` is text, not a link or markup."""
    return _MARKDOWN_SPECIAL.sub(r"\\\1", html.escape(text, quote=False))


def notice_html(message: str, action: str = "Not started") -> str:
    """The HTML notice of a refusal ``message`` (see ``describe``), headed by ``action``."""
    return describe(message).html(action)


__all__ = [
    "EVAL_UPLOAD_LABEL",
    "MODEL_FIRST",
    "Refusal",
    "describe",
    "label_of",
    "markdown_text",
    "notice_html",
    "widget_ids",
]
