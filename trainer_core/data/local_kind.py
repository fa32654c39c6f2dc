"""The kind of the model a request (or the model picker) names, where that model is on this machine:
its ``config.json`` read through the registry (``model_kind.kind_for_folder``), never downloaded.
The preview, the Check, Start, evaluation and chat decide a request's kind here, so they agree; a
model that is not here yet is the fallback kind (the worker decides again once it has the model).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from trainer_core.data.preview_tokenizer import local_model_folder
from trainer_core.model_kind import ModelKind, kind_for_folder, kind_for_request, serving_kind
from trainer_core.models import hub


def named_kind(model_name: Any, settings: Any = None) -> ModelKind:
    """The kind of the model ``model_name`` names where it is on this machine (a folder in the
    allowed folders, the Hub cache, the bundled default: ``preview_tokenizer.local_model_folder``);
    the fallback kind when it is empty or not here. ``settings``: the app's (default:
    ``get_settings()``)."""
    from trainer_core.settings import get_settings

    if not isinstance(model_name, str) or not model_name.strip():
        return kind_for_folder(None)
    return kind_for_folder(local_model_folder(model_name.strip(), settings or get_settings()))


def form_kind(request: Any, settings: Any = None) -> ModelKind:
    """The kind ``request`` (the form's settings, unchecked: the dataset preview) trains its model
    as (``model_kind.kind_for_request``: a switch such as ``is_embedding`` first), its model found as
    ``named_kind`` finds it. ``settings``: the app's (default: ``get_settings()``)."""
    from trainer_core.settings import get_settings

    name = request.model_name.strip() if isinstance(request.model_name, str) else ""
    folder = local_model_folder(name, settings or get_settings()) if name else None
    return kind_for_request(request, folder)


def checked_kind(model_name: str) -> ModelKind:
    """``named_kind`` for a model name a door has already checked: a folder path is read as it is
    (Start's admission and the pre-flight confine ``model_name``: ``hub.check_model``; the worker
    and evaluation read a run's admitted request)."""
    name = model_name.strip()
    if hub.looks_like_path(name):
        return kind_for_folder(Path(name).expanduser())
    return named_kind(name)


def request_kind(request: Any) -> ModelKind:
    """The kind of ``request``'s model (``checked_kind`` of its ``model_name``)."""
    return checked_kind(request.model_name)


def choice_kind(choice: Any) -> ModelKind:
    """The model kind of ``choice`` (a ``serving.schemas.ModelChoice``): its folder's where a kind
    claims it or its config says (a whole model; any run of a kind that serves other than chat: an
    embedding or text-to-speech run's adapter folder), else its base model's; for a choice that
    serves other than chat, the first kind that serves it where that kind does not. So held-out
    files keep the media it reads (a vision-language model's images), a kind evaluates its own
    models (``ModelKind.evaluation``) and serves them (``ModelKind.load_server``: CSM and Orpheus
    both speak)."""
    folder = Path(choice.path) if choice.path else None
    if folder is not None and (choice.serves != "chat" or (not choice.adapter and (folder / "config.json").is_file())):
        own = kind_for_folder(folder)
    else:
        own = checked_kind(choice.base_model)  # a run's base, as its admitted request names it
    return own if choice.serves in ("chat", own.serves) else serving_kind(choice.serves)
