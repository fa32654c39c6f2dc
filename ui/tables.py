"""The page's read-only tables: one way to make them, so that each fits its box at 1280 px."""

from __future__ import annotations

from typing import Any

import gradio as gr
import pandas as pd


def fit_table(value: pd.DataFrame, elem_id: str, max_height: int, **extra: Any) -> gr.Dataframe:
    """A read-only, wrapping ``gr.Dataframe`` of ``value`` (an empty frame names the columns) with
    the ``fit-table`` class (``ui.page_assets``: the browser's table layout over the block's width,
    no column cut at 1280 px), ``max_height`` pixels tall at most; ``extra`` goes to
    ``gr.Dataframe`` (e.g. ``datatype``)."""
    return gr.Dataframe(
        value=value,
        interactive=False,
        wrap=True,
        max_height=max_height,
        elem_id=elem_id,
        elem_classes=["fit-table"],
        **extra,
    )
