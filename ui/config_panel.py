"""Settings as a file and as a command, under the Train form: save the form as YAML, load a YAML
into the form (the keys of ``python -m trainer_core train --config``), and the equivalent CLI
command and ``curl`` call, updated as fields change. Secrets are never written
(``trainer_core.configs``)."""

from __future__ import annotations

import hashlib
import logging
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any, Optional

import gradio as gr

from trainer_core.configs.commands import cli_command, curl_command
from trainer_core.configs.yaml_files import MAX_CONFIG_BYTES, ConfigFileError, parse_config_text, request_to_yaml
from ui.context import Context, dataset_paths
from ui.form import FORM_FIELDS, clean_values, form_values
from ui.refusals import Notice, describe, message_and_fields, notice_html
from ui.uploads import EVAL_UPLOAD_LABEL, received_upload

log = logging.getLogger(__name__)
LOAD_LABEL = "Load settings (YAML)"
SAVED_NAME = "finetune-settings.yaml"


def form_settings(
    ctx: Context, upload: Optional[str], paths_text: str, eval_upload: Optional[str], eval_text: str, values: tuple
) -> tuple[dict[str, Any], bool]:
    """The form as request values (uploads kept in the uploads folder, so the paths last) and
    whether a Hugging Face token was typed (it is never part of the values). Raises ``gr.Error``
    (bad upload) or ValueError (bad column mapping), naming the field."""
    settings = clean_values(dict(zip(FORM_FIELDS, values)))
    has_token = bool(str(settings.pop("hf_token", "") or "").strip())
    settings["local_datasets"] = dataset_paths(upload, paths_text, ctx.settings)
    settings["local_eval_datasets"] = dataset_paths(eval_upload, eval_text, ctx.settings, EVAL_UPLOAD_LABEL)
    return settings, has_token


def save(
    ctx: Context, upload: Optional[str], paths_text: str, eval_upload: Optional[str], eval_text: str, *values: Any
) -> tuple[Any, str]:
    """(the YAML file to download, notice): the form written as ``finetune-settings.yaml`` in a
    temporary folder named by its content's hash (saving the same settings again adds nothing), after the same checks a load makes (so a saved file always loads); a
    setting the schema refuses is named in the notice and nothing is written."""
    try:
        settings, _ = form_settings(ctx, upload, paths_text, eval_upload, eval_text, values)
        text = request_to_yaml(settings)
        parse_config_text(text, "the form")
    except (gr.Error, ValueError) as exc:
        message, fields = message_and_fields(exc)
        return gr.skip(), describe(message.removeprefix("the form: "), fields).html("Not saved")
    digest = hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]  # the same settings saved twice: one file
    folder = Path(tempfile.gettempdir()) / "studio-settings" / digest
    folder.mkdir(parents=True, exist_ok=True)
    target = folder / SAVED_NAME
    if not target.is_file():
        target.write_text(text, encoding="utf-8")
    return gr.update(value=str(target), visible=True), ""


def load(ctx: Context, file: Optional[str]) -> list[Any]:
    """[train upload, server paths, eval upload, eval paths, *form widgets, notice] from an uploaded
    YAML file: every setting it names, defaults for the rest; its dataset paths replace the
    uploads. A bad file changes nothing and the notice says why, naming the key."""
    keep = [gr.skip()] * (4 + len(FORM_FIELDS))
    try:
        path = received_upload(file, ctx.settings, LOAD_LABEL)
        if path is None:
            return [*keep, ""]
        if path.stat().st_size > MAX_CONFIG_BYTES:
            raise ConfigFileError(
                f"{path.name} is larger than {MAX_CONFIG_BYTES // 1024} KB: it is not a settings file"
            )
        values, notes = parse_config_text(path.read_bytes().decode("utf-8"), path.name)
    except gr.Error as exc:
        return [*keep, notice_html(exc, "Not loaded")]
    except UnicodeDecodeError:
        return [*keep, Notice(f"{path.name} is not UTF-8 text: save it as UTF-8", ()).html("Not loaded")]
    except (ConfigFileError, OSError) as exc:  # in the file's own words: its keys, not the form's labels
        return [*keep, Notice(str(exc), ()).html("Not loaded")]
    paths, eval_paths, *widgets = form_values(values)
    uploads = [
        None if values.get("local_datasets") else gr.skip(),
        None if values.get("local_eval_datasets") else gr.skip(),
    ]
    gr.Info(f"Loaded {len(values)} settings from {path.name}" + "".join(f"; {note}" for note in notes))
    return [uploads[0], paths, uploads[1], eval_paths, *widgets, ""]


def commands(
    ctx: Context,
    upload: Optional[str],
    paths_text: str,
    eval_upload: Optional[str],
    eval_text: str,
    *values: Any,
    request: gr.Request = None,
) -> tuple[str, str]:
    """(CLI command, ``curl`` call) for the form as it is: only the settings that differ from the
    defaults; the tokens left out (``$STUDIO_API_TOKEN`` when the API needs one). A value that
    cannot be read yet is said in place of the commands."""
    try:
        settings, has_token = form_settings(ctx, upload, paths_text, eval_upload, eval_text, values)
    except gr.Error as exc:
        return f"# {exc.message}", ""
    except ValueError as exc:
        return f"# {exc}", ""
    base = _base_url(request)
    return cli_command(settings), curl_command(settings, base, ctx.settings.api_token is not None, has_token)


def commands_handler(ctx: Context) -> Callable[..., tuple[str, str]]:
    """``commands`` bound to ``ctx`` as a plain function whose ``gr.Request`` parameter Gradio can
    see: Gradio reads type hints (a ``functools.partial`` hides them) and fills only positional
    parameters before ``*values``, so the request comes first."""

    def handler(
        request: gr.Request,
        upload: Optional[str],
        paths_text: str,
        eval_upload: Optional[str],
        eval_text: str,
        *values: Any,
    ) -> tuple[str, str]:
        return commands(ctx, upload, paths_text, eval_upload, eval_text, *values, request=request)

    return handler


def _base_url(request: Optional[gr.Request]) -> str:
    """The address this page was opened at (behind a proxy: its forwarded host and scheme)."""
    headers = getattr(request, "headers", None) or {}
    host = headers.get("x-forwarded-host") or headers.get("host") or "127.0.0.1:7860"
    scheme = headers.get("x-forwarded-proto") or "http"
    return f"{scheme}://{host}"
