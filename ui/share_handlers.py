"""The Runs tab's share links: create a signed, optionally expiring link that opens a chat page (a
search page for an embedding model) for one run's model (and serves as an OpenAI ``base_url`` for
it alone), list them, revoke one.

(No ``from __future__ import annotations``: Gradio finds the ``gr.Request`` parameter by its
evaluated annotation.)"""

from datetime import datetime
from typing import Optional

import gradio as gr
import pandas as pd

from trainer_core.serving.engine import ChatEngine, ChatInputError
from trainer_core.serving.share import ShareLinks, UnknownShareLink
from ui.refused import Refused

LINK_COLUMNS = ["link", "model", "state", "expires", "chat page"]


def _base_url(request: Optional[gr.Request]) -> str:
    """This server's address as the visitor reached it (behind a proxy: its forwarded host)."""
    if request is None:
        return ""
    headers = request.headers
    scheme = (
        headers.get("x-forwarded-proto")
        or getattr(request.request, "url", None)
        and request.request.url.scheme
        or "http"
    )
    host = headers.get("x-forwarded-host") or headers.get("host") or ""
    return f"{scheme}://{host}" if host else ""


def links_table(links: ShareLinks, job_id: Optional[str], request: Optional[gr.Request] = None) -> pd.DataFrame:
    """The share links of run ``job_id`` (its final weights and checkpoints), newest first."""
    job_id = (job_id or "").strip()
    rows = []
    for link in links.list():
        if job_id and link.model_id.split("/")[0] != job_id:
            continue
        expires = (
            "never" if link.expires_at is None else datetime.fromtimestamp(link.expires_at).strftime("%Y-%m-%d %H:%M")
        )
        rows.append([link.id, link.model_id, link.state.value, expires, _base_url(request) + link.url_path])
    return pd.DataFrame(rows, columns=LINK_COLUMNS)


def create(
    links: ShareLinks, engine: ChatEngine, job_id: Optional[str], hours: Optional[float], request: gr.Request
) -> tuple[str, pd.DataFrame]:
    """A new link to run ``job_id``'s final weights; its chat page and OpenAI ``base_url``."""
    job_id = (job_id or "").strip()
    if not job_id:
        raise Refused("Click a run in the table first.")
    try:
        choice = engine.resolve(job_id)
        link = links.create(choice.id, expires_in_hours=hours or None)
    except (ChatInputError, ValueError) as exc:
        raise Refused(f"Share link: {exc}") from None
    base = _base_url(request)
    until = (
        "never expires"
        if link.expires_at is None
        else f"expires {datetime.fromtimestamp(link.expires_at):%Y-%m-%d %H:%M}"
    )
    use, page = ("search with", "search page") if choice.serves == "embeddings" else ("chat with", "chat page")
    text = (
        f"Share link for **{choice.label}** ({until}); anyone with it can {use} this model and nothing else:\n\n"
        f"- {page}: `{base}{link.url_path}`\n- OpenAI `base_url`: `{base}{link.api_base_path}` (model `{choice.id}`)"
    )
    return text, links_table(links, job_id, request)


def revoke(
    links: ShareLinks, job_id: Optional[str], link_id: Optional[str], request: gr.Request
) -> tuple[str, pd.DataFrame]:
    """Revoke link ``link_id``: it stops working at once."""
    try:
        link = links.revoke((link_id or "").strip())
    except UnknownShareLink:
        raise Refused(f"Revoke: no share link '{(link_id or '').strip()}'; copy its id from the table.") from None
    return f"Revoked link {link.id}: it no longer works.", links_table(links, job_id, request)


def handlers(links: ShareLinks, engine: ChatEngine) -> tuple:
    """(create, revoke) bound to ``links`` and ``engine``, with the ``gr.Request`` parameter visible
    to Gradio (which does not see it through ``functools.partial``)."""

    def on_create(job_id: Optional[str], hours: Optional[float], request: gr.Request) -> tuple[str, pd.DataFrame]:
        return create(links, engine, job_id, hours, request)

    def on_revoke(job_id: Optional[str], link_id: Optional[str], request: gr.Request) -> tuple[str, pd.DataFrame]:
        return revoke(links, job_id, link_id, request)

    return on_create, on_revoke
