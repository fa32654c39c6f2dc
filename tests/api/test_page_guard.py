"""The page's HTML answers: the early script first in <head> for everyone, the API description
removed for visitors who are not logged in (``api.page_guard.ApiInfoGuard``)."""

from __future__ import annotations

from fastapi import FastAPI
from fastapi.responses import HTMLResponse, JSONResponse
from fastapi.testclient import TestClient

from api.page_guard import ApiInfoGuard
from ui.page_assets import EARLY_SCRIPT

PAGE = '<html><head><title>t</title><script>window.gradio_api_info = {"named_endpoints": {"/start": {}}};</script></head></html>'


def client(logged_in: bool) -> TestClient:
    app = FastAPI()
    app.get("/")(lambda: HTMLResponse(PAGE))
    app.get("/data")(lambda: JSONResponse({"html": "<head>"}))
    app.add_middleware(ApiInfoGuard, is_logged_in=lambda _: logged_in, head_script=EARLY_SCRIPT.encode())
    return TestClient(app)


def test_every_page_gets_the_early_script_first_and_guests_lose_the_api_description():
    for logged_in in (True, False):
        page = client(logged_in).get("/").text
        assert page.startswith("<html><head>" + EARLY_SCRIPT + "<title>")
        assert ('"/start"' in page) is logged_in
    assert client(False).get("/data").json() == {"html": "<head>"}  # not a page: untouched
