"""Share links over HTTP: create / list / revoke with the API token, the chat page and the scoped
OpenAI base URL (raw HTTP and the real ``openai`` client), on the whole app with a fake engine."""

from __future__ import annotations

import html
import re
import shutil

import openai
import pytest

from tests.support.chat_server import CHECKPOINT, JOB, LABEL, OTHER_JOB, chat_body, sse_data


def share(studio, model: str = JOB, **extra) -> dict:
    """A new link (its JSON)."""
    answer = studio.api().post("/api/train/share", json={"model": model, **extra})
    assert answer.status_code == 201, answer.text
    return answer.json()


def test_create_list_revoke(chat_studio):
    client = chat_studio.api()
    link = share(chat_studio, CHECKPOINT, expires_in_hours=2)
    assert link["model_id"] == CHECKPOINT and link["state"] == "active"
    assert link["url_path"] == f"/s/{link['token']}" and link["api_base_path"] == f"/s/{link['token']}/v1"
    assert link["expires_at"] == pytest.approx(link["created_at"] + 7200)
    listed = client.get("/api/train/share").json()
    assert link["id"] in [x["id"] for x in listed]
    assert [x["id"] for x in client.get("/api/train/share", params={"model": CHECKPOINT}).json()] == [link["id"]]
    revoked = client.delete(f"/api/train/share/{link['id']}")
    assert revoked.status_code == 200 and revoked.json()["state"] == "revoked"
    assert client.delete("/api/train/share/0123456789abcdef").status_code == 404
    # The Python API the Runs tab uses sees the same links.
    assert chat_studio.links.verify(share(chat_studio)["token"]).model_id == JOB


@pytest.mark.parametrize(
    "body, status, words",
    [
        ({"model": "base"}, 400, "base model cannot be shared"),
        ({"model": "job_20990101_000000_deadbeef"}, 404, "no such model"),
        ({"model": JOB, "expires_in_hours": 0}, 422, "expires_in_hours"),
        ({"model": JOB, "expires_in_hours": 10**7}, 422, "expires_in_hours"),
        ({"model": JOB, "expires_in_hours": 5e-324}, 422, "must be at least one minute"),  # was created expired
        ({"model": JOB, "extra": 1}, 422, "extra"),
    ],
)
def test_create_refusals(chat_studio, body, status, words):
    answer = chat_studio.api().post("/api/train/share", json=body)
    assert answer.status_code == status and words in answer.text, answer.text


def test_a_model_without_weights_cannot_be_shared(chat_studio):
    chat_studio.engine.no_weights.add(OTHER_JOB)
    answer = chat_studio.api().post("/api/train/share", json={"model": OTHER_JOB})
    assert answer.status_code == 400 and "no longer exists" in answer.text


def test_managing_links_needs_the_api_token(chat_studio):
    plain = chat_studio.plain()
    assert plain.post("/api/train/share", json={"model": JOB}).status_code == 401
    assert plain.get("/api/train/share").status_code == 401
    assert plain.delete("/api/train/share/0123456789abcdef").status_code == 401


def test_the_chat_page(chat_studio):
    link = share(chat_studio)
    page = chat_studio.plain().get(link["url_path"])  # no login, no API token: the link is the key
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    text = page.text
    assert f"<title>{html.escape(LABEL)}</title>" in text and LABEL not in text  # escaped, never raw
    assert f'<script type="application/json" id="config">{{"model": "{JOB}"}}</script>' in text
    assert not re.search(r"(src|href)=[\"']?(https?:)?//", text)  # nothing from another site
    assert "gradio" not in text.lower() and "/v1/chat/completions" in text and 'id="stop"' in text
    csp = page.headers["content-security-policy"]
    assert "default-src 'none'" in csp and "connect-src 'self'" in csp and "frame-ancestors 'none'" in csp
    nonce = re.search(r"'nonce-([^']+)'", csp)[1]
    assert text.count(f'nonce="{nonce}"') == 2  # the style and the script, nothing else runs
    assert page.headers["referrer-policy"] == "no-referrer" and page.headers["cache-control"] == "no-store"
    assert chat_studio.plain().get(link["url_path"] + "/").status_code == 200


def test_scoped_base_url_with_raw_http(chat_studio):
    link = share(chat_studio)
    client, base = chat_studio.plain(), link["api_base_path"]
    models = client.get(f"{base}/models").json()
    assert models["object"] == "list" and [m["id"] for m in models["data"]] == [JOB]
    assert client.get(f"{base}/models/{JOB}").json()["id"] == JOB
    assert client.get(f"{base}/models/{OTHER_JOB}").status_code == 404
    answer = client.post(f"{base}/chat/completions", json={"messages": [{"role": "user", "content": "no model"}]})
    assert answer.status_code == 200 and answer.json()["model"] == JOB  # omitted: the link's model
    with client.stream("POST", f"{base}/chat/completions", json=chat_body("streamed", stream=True)) as streamed:
        events = sse_data(streamed)
    assert (
        events[-1] == "[DONE]"
        and "".join(e["choices"][0]["delta"].get("content", "") for e in events[:-1] if e["choices"])
        == "echo: streamed"
    )
    for other in ("base", OTHER_JOB, CHECKPOINT, JOB + " ", JOB.upper()):
        refused = client.post(f"{base}/chat/completions", json=chat_body() | {"model": other})
        assert refused.status_code == 404 and refused.json()["error"]["code"] == "model_not_found"
        assert f"serves only the model '{JOB}'" in refused.json()["error"]["message"]
    assert [call[0] for call in chat_studio.engine.calls] == [JOB, JOB]


def test_scoped_base_url_with_the_openai_client(chat_studio):
    link = share(chat_studio, CHECKPOINT)
    client = openai.OpenAI(base_url=chat_studio.url + link["api_base_path"], api_key="unused", max_retries=0)
    assert [m.id for m in client.models.list()] == [CHECKPOINT]
    reply = client.chat.completions.create(model=CHECKPOINT, messages=[{"role": "user", "content": "hi"}])
    assert reply.choices[0].message.content == "echo: hi"
    chunks = list(
        client.chat.completions.create(model=CHECKPOINT, stream=True, messages=[{"role": "user", "content": "one two"}])
    )
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == "echo: one two"
    with pytest.raises(openai.NotFoundError):
        client.chat.completions.create(model=JOB, messages=[{"role": "user", "content": "hi"}])


def test_errors_on_shared_routes_show_no_server_paths(chat_studio):
    link = share(chat_studio)
    client, base = chat_studio.plain(), link["api_base_path"]
    chat_studio.engine.busy = True
    busy = client.post(f"{base}/chat/completions", json=chat_body())
    assert busy.status_code == 409 and "training job is running" in busy.json()["error"]["message"]
    chat_studio.engine.busy = False
    chat_studio.engine.no_weights.add(JOB)
    for answer in (
        client.get(link["url_path"]),
        client.get(f"{base}/models"),
        client.post(f"{base}/chat/completions", json=chat_body()),
    ):
        assert answer.status_code == 404 and "no longer available" in answer.text and "/srv/" not in answer.text


CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
ARGS = ["--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking"]


@pytest.mark.browser
@pytest.mark.skipif(CHROMIUM is None, reason="needs Debian's chromium (apt-get install chromium)")
def test_the_chat_page_in_a_browser(chat_studio):
    """Headless Chromium: the label, a streamed answer, a second turn that carries the first, Stop."""
    playwright = pytest.importorskip("playwright.sync_api")
    from tests.e2e.conftest import wait_for

    link = share(chat_studio)
    with playwright.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        page = browser.new_page()
        problems: list[str] = []
        page.on("console", lambda m: problems.append(m.text) if m.type in ("error", "warning") else None)
        page.on("pageerror", lambda e: problems.append(str(e)))
        page.goto(chat_studio.url + link["url_path"])
        assert page.locator("#label").inner_text() == LABEL
        prompt = page.locator("#prompt")
        prompt.fill("hello world")
        prompt.press("Enter")
        page.locator(".assistant").first.get_by_text("echo: hello world").wait_for(timeout=10_000)
        prompt.fill("again")
        page.locator("#send").click()
        page.locator(".assistant").nth(1).get_by_text("echo: again").wait_for(timeout=10_000)
        sent = [(m.role, m.content) for m in chat_studio.engine.calls[-1][1]]
        assert sent == [("user", "hello world"), ("assistant", "echo: hello world"), ("user", "again")]
        chat_studio.engine.token_delay_s = 0.2
        prompt.fill(" ".join(["slow"] * 100))
        prompt.press("Enter")
        page.locator(".assistant").nth(2).get_by_text("echo: slow").wait_for(timeout=10_000)
        page.locator("#stop").click()
        page.locator(".assistant").nth(2).get_by_text("(stopped)").wait_for(timeout=10_000)
        wait_for(chat_studio.engine.closed.is_set, 10, "the stopped generation to end")
        assert page.locator("#send").is_enabled() and not problems, problems
        browser.close()
