"""The writer model's endpoint: http(s) only, this machine only unless the server allows others,
shown without credentials; an endpoint nobody answers stops the run with a clear refusal; a
structured answer is asked strict with room for its longest JSON, plainly where the endpoint
refuses response_format, and named when cut at max_tokens."""

from __future__ import annotations

import http.server
import json
import socket
import threading

import pytest
from pydantic import SecretStr

from trainer_core.recipes.answer_size import answer_tokens
from trainer_core.recipes.errors import MODEL_UNREACHABLE, REMOTE_MODEL, RecipeError
from trainer_core.recipes.schema import WriterModel
from trainer_core.recipes.writer import CutShort, ModelFailure, Writer, check_endpoint, on_this_machine, shown_endpoint


@pytest.mark.parametrize(
    "url", ["http://127.0.0.1:7860/v1", "http://localhost:8080/v1", "https://[::1]/v1", "http://127.1.2.3/v1"]
)
def test_loopback_endpoints_are_taken(url):
    assert on_this_machine(url)
    check_endpoint(url, allow_remote=False)


@pytest.mark.parametrize("url", ["https://api.example.com/v1", "http://10.0.0.5:8000/v1", "http://169.254.169.254/"])
def test_remote_endpoints_are_refused_unless_allowed(url):
    with pytest.raises(RecipeError) as refused:
        check_endpoint(url, allow_remote=False)
    assert refused.value.code == REMOTE_MODEL and "STUDIO_ALLOW_REMOTE_RECIPE_MODELS" in str(refused.value)
    check_endpoint(url, allow_remote=True)


@pytest.mark.parametrize("url", ["file:///etc/passwd", "ftp://127.0.0.1/", "127.0.0.1:7860", ""])
def test_other_schemes_are_refused(url):
    with pytest.raises(RecipeError, match="is not an http\\(s\\) URL"):
        check_endpoint(url, allow_remote=True)


def test_credentials_in_the_url_are_never_shown():
    assert shown_endpoint("https://user:pw-123@host.example:8443/v1?key=abc#x") == "https://host.example:8443/v1"


def test_an_endpoint_nobody_answers_stops_with_a_refusal():
    with socket.socket() as probe:  # a port that was free a moment ago: nothing listens there
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    model = WriterModel(endpoint=f"http://127.0.0.1:{port}/v1", model="base", max_retries=0, timeout_s=5)
    writer = Writer(model, SecretStr("secret-value-123"), allow_remote=False)
    with pytest.raises(RecipeError) as refused:
        writer.ask([{"role": "user", "content": "hi"}])
    assert refused.value.code == MODEL_UNREACHABLE
    assert (
        str(refused.value) == f"model: http://127.0.0.1:{port}/v1 (model base) cannot be reached (APIConnectionError)"
    )


def test_an_endpoint_that_does_not_answer_in_time_drops_the_row_only():
    with socket.socket() as server:  # listens (the connection is made) but never answers
        server.bind(("127.0.0.1", 0))
        server.listen(4)
        model = WriterModel(
            endpoint=f"http://127.0.0.1:{server.getsockname()[1]}/v1", model="m", max_retries=0, timeout_s=1
        )
        with pytest.raises(ModelFailure, match=r"no answer within timeout_s \(1 s\)"):
            Writer(model, None, allow_remote=False).ask([{"role": "user", "content": "hi"}])


def test_a_redirect_is_not_followed_off_the_endpoint():
    """A loopback endpoint answering 307 to another host would carry the prompts (the documents)
    past the this-machine check: the writer refuses the redirect and never asks the target."""
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    asked = []

    class Target(BaseHTTPRequestHandler):  # stands for a host off this machine
        def do_POST(self):
            asked.append(self.rfile.read(int(self.headers.get("content-length") or 0)))
            self.send_response(200)
            self.end_headers()

        def log_message(self, *args):
            pass

    class Redirect(Target):
        def do_POST(self):
            self.send_response(307)
            self.send_header("Location", f"http://127.0.0.1:{target.server_port}{self.path}")
            self.send_header("Content-Length", "0")
            self.end_headers()

    target, redirect = ThreadingHTTPServer(("127.0.0.1", 0), Target), ThreadingHTTPServer(("127.0.0.1", 0), Redirect)
    for server in (target, redirect):
        threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        model = WriterModel(endpoint=f"http://127.0.0.1:{redirect.server_port}/v1", model="m", max_retries=0)
        with pytest.raises(RecipeError) as refused:
            Writer(model, None, allow_remote=False).ask([{"role": "user", "content": "the document"}])
    finally:
        for server in (target, redirect):
            server.shutdown()
            server.server_close()
    assert asked == []
    assert refused.value.code == MODEL_UNREACHABLE and "redirect" in str(refused.value)


@pytest.mark.parametrize("status", [401, 500])
def test_an_endpoint_that_echoes_the_key_does_not_put_it_in_a_message(status):
    """Some servers quote the key they refused ("Invalid API key: ..."): the refusal (answered by the
    preview, the task's error) and a dropped row's reason (dropped.jsonl) never carry it."""
    import json
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    class Echo(BaseHTTPRequestHandler):
        def do_POST(self):
            body = json.dumps({"error": {"message": f"Invalid API key: {self.headers['Authorization']}"}}).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Echo)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        model = WriterModel(endpoint=f"http://127.0.0.1:{server.server_port}/v1", model="m", max_retries=0)
        with pytest.raises((RecipeError, ModelFailure)) as failed:
            Writer(model, SecretStr("secret-value-123"), allow_remote=False).ask([{"role": "user", "content": "hi"}])
    finally:
        server.shutdown()
        server.server_close()
    assert "Invalid API key" in str(failed.value) and "secret-value-123" not in str(failed.value)


class _Endpoint(http.server.BaseHTTPRequestHandler):
    """A chat-completions endpoint that records each request body and answers from ``replies``
    (status, finish reason, content), one per request."""

    bodies: list[dict] = []
    replies: list[tuple[int, str, str]] = []

    def do_POST(self) -> None:  # noqa: N802 (http.server's name)
        self.bodies.append(json.loads(self.rfile.read(int(self.headers["Content-Length"]))))
        status, finish, content = self.replies.pop(0)
        if status == 200:
            choice = {"index": 0, "finish_reason": finish, "message": {"role": "assistant", "content": content}}
            body = {"id": "c", "object": "chat.completion", "created": 0, "model": "m", "choices": [choice]}
        else:
            body = {"error": {"message": content, "type": "invalid_request_error", "param": "response_format"}}
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args) -> None:
        pass


@pytest.fixture()
def endpoint():
    _Endpoint.bodies, _Endpoint.replies = [], []
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Endpoint)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    model = WriterModel(endpoint=f"http://127.0.0.1:{server.server_address[1]}/v1", model="m", max_retries=0)
    yield Writer(model, None, allow_remote=False), _Endpoint
    server.shutdown()


SCHEMA = {
    "type": "object",
    "properties": {"evidence": {"type": "string", "maxLength": 300}},
    "required": ["evidence"],
    "additionalProperties": False,
}


def test_a_structured_answer_is_asked_strict_with_room_for_the_longest_json(endpoint):
    writer, server = endpoint
    server.replies = [(200, "stop", '{"evidence": "x"}'), (200, "stop", "free text")]
    assert writer.ask([{"role": "user", "content": "q"}], SCHEMA, "qa") == '{"evidence": "x"}'
    assert writer.ask([{"role": "user", "content": "q"}]) == "free text"
    structured, free = server.bodies
    assert structured["response_format"] == {
        "type": "json_schema",
        "json_schema": {"name": "qa", "schema": SCHEMA, "strict": True},
    }
    assert structured["max_tokens"] == answer_tokens(SCHEMA) > 512  # above the recipe's max_tokens
    assert "response_format" not in free and free["max_tokens"] == 512


def test_an_endpoint_without_structured_outputs_is_asked_plainly_from_then_on(endpoint):
    writer, server = endpoint
    server.replies = [(400, "", "response_format is not supported"), (200, "stop", "{}"), (200, "stop", "{}")]
    for _ in range(2):
        assert writer.ask([{"role": "user", "content": "q"}], SCHEMA) == "{}"
    assert ["response_format" in b for b in server.bodies] == [True, False, False] and writer.plain_json


def test_a_json_answer_cut_at_max_tokens_is_named_so(endpoint):
    writer, server = endpoint
    server.replies = [(200, "length", '{"evidence": "xx')]
    limit = answer_tokens(SCHEMA)
    with pytest.raises(CutShort, match=rf"cut at max_tokens \({limit}\) before its JSON closed"):
        writer.ask([{"role": "user", "content": "q"}], SCHEMA)
