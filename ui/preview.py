"""The Train form's dataset preview: format, row count, rows over Max seq length with the chosen
model's chat template, template placeholders left in the data, and the first rows turn by turn; for
a kind that reads its own columns (an embedding run: ``ModelKind.preview_rows``) what it found and
its rows column by column."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Optional

import gradio as gr
import pandas as pd

from trainer_core.admission.request_paths import confine_dataset
from trainer_core.data import import_data_stack
from trainer_core.data.files import DatasetError
from trainer_core.data.fill import fill_record
from trainer_core.fieldmeta import FIELDS, bounds, default
from trainer_core.refusals import Refusal
from trainer_core.request.mappings import parse_mapping
from trainer_core.schemas import TrainingStartRequest
from trainer_core.vocabulary import FormatType, TrainingMethod
from ui import audio_panel, embedding_panel, placeholder_panel
from ui.context import Context
from ui.form import TRI_VALUES, build_request
from ui.refusals import describe, markdown_text
from ui.train_handlers import EMPTY_PREVIEW
from ui.uploads import received_upload, split_paths


def files_line(received: Optional[Path], typed: list[str]) -> str:
    """The files Check and Start read, when there are several (the upload, then each typed path: the
    list ``ui.context.dataset_paths`` gives them), above the preview of the first; empty for one."""
    names = ([f"{received.name} (uploaded)"] if received else []) + [f"{Path(p).name} ({p})" for p in typed]
    if len(names) < 2:
        return ""
    listed = ", ".join(markdown_text(name) for name in names)
    return (
        f"**Check and Start read {len(names)} files:** {listed}. The preview shows the first; remove a path "
        "you did not mean from *...or dataset paths on the server*.\n\n"
    )


def preview(
    ctx: Context,
    upload: Optional[str],
    paths_text: str,
    format_type: str,
    mapping_text: str,
    model_name: Optional[str] = None,
    max_seq_length: Optional[float] = None,
    training_method: Optional[str] = None,
    is_dataset_audio: Any = "",
    max_audio_seconds: Optional[float] = None,
    is_embedding: Any = "",
    embedding_columns: Any = "",
    embedding_loss: Any = "",
    speaker_column: Any = "",
) -> tuple[Any, ...]:
    """The dataset preview of the uploaded file or the first typed path (confined to the allowed
    folders): detected format, row count, rows longer than the Max seq length with the chosen
    model's chat template (when its tokenizer is on this machine), a warning with the fix for
    template placeholders left in the data, and the first rows turn by turn (for a preference
    ``training_method``: prompt and answers; for a model that reads audio, or *Data has audio* on: a
    player and the duration of each clip, a line on all the clips, clips over ``max_audio_seconds``
    refused by row; a speech-to-text or text-to-speech model's own rows, as ``mapping_text`` and
    ``speaker_column`` map them). An embedding run (an embedding model, or ``is_embedding`` on): the shape of its
    columns (as named, or mapped by ``embedding_columns``) and the loss training chooses (or
    ``embedding_loss``), rows over Max seq length by the embedder's tokenizer, the first rows column
    by column. Problems are shown inline, naming the file (and the row and column). Returns
    (summary, table, *``placeholder_panel.updates``): a field per placeholder found."""
    none = placeholder_panel.updates([])
    typed = split_paths(paths_text if isinstance(paths_text, str) else "")
    if not upload and not typed:
        return "Choose a dataset file or type its path.", EMPTY_PREVIEW.copy(), *none
    try:
        received = received_upload(upload, ctx.settings)
        first = (
            str(received) if received else confine_dataset(typed[0], list(ctx.settings.allowed_roots), "dataset path")
        )
        length = default("max_seq_length") if max_seq_length is None else int(max_seq_length)
        limits = bounds(FIELDS["max_seq_length"])
        low, high = limits["minimum"], limits["maximum"]
        if not low <= length <= high:
            raise Refusal(
                f"max_seq_length: {length} is outside {low}..{high}; Start would refuse it", fields=("max_seq_length",)
            )
        import_data_stack()
        from trainer_core.data.inspect import inspect_dataset, load_preview_tokenizer
        from trainer_core.data.local_kind import form_kind

        model = model_name if isinstance(model_name, str) and model_name.strip() else default("model_name")
        tokenizer = load_preview_tokenizer(model, ctx.settings)
        method = TrainingMethod(training_method or default("training_method"))
        own = dict(is_embedding=is_embedding, embedding_columns=embedding_columns, embedding_loss=embedding_loss)
        own.update(custom_format_mapping=mapping_text, is_dataset_audio=is_dataset_audio, speaker_column=speaker_column)
        if max_audio_seconds is not None:
            own["max_audio_seconds"] = max_audio_seconds
        request = form_request(ctx, first, model, length, method, own)
        kind = form_kind(request, ctx.settings)  # its rows keep the media it reads (images), or read its own columns
        found = inspect_dataset(
            first,
            FormatType(format_type),
            parse_mapping(mapping_text),
            tokenizer,
            length,
            method=method,
            kind=kind,
            is_dataset_audio=TRI_VALUES.get(is_dataset_audio),
            max_audio_seconds=default("max_audio_seconds") if max_audio_seconds is None else float(max_audio_seconds),
            request=request,
        )
    except gr.Error as exc:
        return f"**Cannot use this dataset:** {markdown_text(exc.message)}", EMPTY_PREVIEW.copy(), *none
    except (DatasetError, ValueError, TypeError, OverflowError, OSError) as exc:
        return f"**Cannot use this dataset:** {markdown_text(describe(exc).text)}", EMPTY_PREVIEW.copy(), *none
    summary = files_line(received, typed) + preview_summary(found, Path(first).name, length, tokenizer is not None)
    filled = fill_record(ctx.settings.uploads_dir / Path(first).name, content=received) if received else None
    if filled:
        values = ", ".join(f"`{{{{{k}}}}}` = {markdown_text(v)}" for k, v in filled.get("values", {}).items())
        summary += f"\n\nPlaceholders filled in ({values}) in a copy of {markdown_text(str(filled.get('source')))}."
    return summary, preview_table(found.sample), *placeholder_panel.updates(found.placeholders)


def form_request(
    ctx: Context, path: str, model: str, max_seq_length: int, method: TrainingMethod, own: dict[str, Any]
) -> TrainingStartRequest:
    """The form's settings the preview reads (``own``: the values of the widgets a kind reads its
    rows by, by field name: the embedding options, the mapping, the audio options) as Start takes
    them (``form.build_request``, with ``path`` as the data), the embedding and audio options left
    out while their section is hidden (``embedding_panel.applied``, ``audio_panel.applied``). Raises
    Refused naming the field (a malformed Embedding columns or mapping, an embedding run with a
    generation method)."""
    values = {"model_name": model, "max_seq_length": max_seq_length, "training_method": method.value, **own}
    shown = audio_panel.applied(embedding_panel.applied(values, ctx.settings), ctx.settings)
    return build_request(shown, [path], [])


def preview_table(sample: pd.DataFrame) -> Any:
    """The preview table's update: the sample with a Markdown column per text column (``row`` stays
    a number); the page's ``.fit-table`` style shares the width (preference rows show prompt and
    answers side by side)."""
    texts = len(sample.columns) - 1
    return gr.update(
        value=sample,
        datatype=["number", *["markdown"] * texts],
    )


def preview_summary(found: Any, name: str, max_seq_length: int, has_tokenizer: bool) -> str:
    """Markdown above the preview table: format (or a kind's ``layout``) and rows, truncation (against
    the report's own length: a kind may cut below ``max_seq_length``), placeholder warning."""
    rows = "rows: more than can be counted quickly" if found.rows_total is None else f"**{found.rows_total}** rows"
    layout = markdown_text(found.layout) if getattr(found, "layout", "") else found.format.value
    lines = [f"Detected format: **{layout}** ({markdown_text(name)}) · {rows}"]
    report = found.truncation
    if report is not None:
        max_seq_length = report.max_seq_length
        scope = "" if report.all_rows_checked else f" of the first {report.rows_checked}"
        if report.rows_over:
            listed = ", ".join(str(r) for r in report.first_rows)
            lines.append(
                f"**{report.rows_over}{scope} rows are longer than Max seq length ({max_seq_length} tokens)** "
                f"and will be truncated (rows {listed}{'…' if report.rows_over > len(report.first_rows) else ''}; "
                f"longest: row {report.longest_row}, {report.longest_tokens} tokens). Raise Max seq length to keep them whole."
            )
        else:
            lines.append(
                f"No row{scope} is longer than Max seq length ({max_seq_length} tokens; longest: "
                f"{report.longest_tokens})."
            )
    elif not has_tokenizer:
        lines.append("Truncation is checked once the model's tokenizer is on this machine.")
    lines += [markdown_text(note) for note in getattr(found, "notes", [])]
    if found.placeholders:
        names = ", ".join(f"`{{{{{p.name}}}}}` in {p.rows} rows" for p in found.placeholders)
        where = (
            "Type their values in the fields below and press Fill in"
            if len(found.placeholders) <= placeholder_panel.MAX_FIELDS
            else "Too many to fill on the page: replace them in the file"
        )
        lines.append(
            f"⚠️ **Template placeholders left in the data** ({names}): the model would learn the braces "
            f"literally. {where}."
        )
    return "\n\n".join(lines)
