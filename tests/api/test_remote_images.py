"""``image_url`` parts of ``/v1/chat/completions``: data: URLs become the message's images
with a marker where the part stood; http(s) URLs are refused unless the server fetches them, and
then only an ``image/*`` answer within the size limit is taken (a local HTTP server stands in for
the web)."""

from __future__ import annotations

import base64
import functools
import http.server
import threading

import pytest

from api import remote_images
from api.openai_errors import OpenAIError
from api.openai_schemas import ChatCompletionRequest


@pytest.fixture(scope="module")
def web(datasets_dir):
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(datasets_dir))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


def ask(*parts: dict) -> ChatCompletionRequest:
    return ChatCompletionRequest(messages=[{"role": "user", "content": list(parts)}])


def test_a_data_url_part_is_an_image_where_it_stood():
    url = "data:image/png;base64,iVBORw0KGgo="
    message = ask(
        {"type": "text", "text": "Compare "}, {"type": "image_url", "image_url": {"url": url}}
    ).chat_messages()
    assert message[0].content == "Compare <image>" and message[0].images == [url]


def test_remote_urls_are_refused_unless_fetched(web, datasets_dir):
    remote = ask({"type": "image_url", "image_url": {"url": f"{web}/mllm_demo_data/1.jpg"}})
    with pytest.raises(OpenAIError, match="does not fetch remote image URLs"):
        remote.chat_messages()
    fetched = remote.chat_messages(remote_images.fetch_image)[0].images[0]
    assert fetched.startswith("data:image/jpeg;base64,")
    assert base64.b64decode(fetched.split(",", 1)[1]) == (datasets_dir / "mllm_demo_data" / "1.jpg").read_bytes()


def test_a_fetched_answer_must_be_a_small_image(web, monkeypatch):
    with pytest.raises(OpenAIError, match="not an image"):
        remote_images.fetch_image(f"{web}/identity.json")
    with pytest.raises(OpenAIError, match="answered 404"):
        remote_images.fetch_image(f"{web}/missing.jpg")
    monkeypatch.setattr(remote_images, "MAX_BYTES", 1000)
    with pytest.raises(OpenAIError, match="larger than"):
        remote_images.fetch_image(f"{web}/mllm_demo_data/1.jpg")
    with pytest.raises(OpenAIError, match="could not be fetched"):
        remote_images.fetch_image("http://127.0.0.1:9/a.jpg")


def test_paths_are_not_image_urls():
    for url in ("/etc/passwd", "file:///etc/passwd", "data:text/plain;base64,aGk="):
        with pytest.raises(OpenAIError, match="give a data:image/"):
            ask({"type": "image_url", "image_url": {"url": url}}).chat_messages()
