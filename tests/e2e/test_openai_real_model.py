"""The real fine-tuned SmolLM2 (``trained_run``) through the ``openai`` client: ``/v1`` with the API
token, a share link's scoped base URL for one checkpoint, the Codex-style round trip through
``/v1/responses`` and a ``text.format`` JSON schema it must follow."""

from __future__ import annotations

import json

import httpx
import openai
import pytest
from pydantic import SecretStr

from tests.e2e.conftest import TOKEN, ServerThread
from tests.support.chat_server import api_app
from tests.support.codex_round_trip import codex_round_trip

pytestmark = pytest.mark.slow
QUESTION = [{"role": "user", "content": "Who are you?"}]


@pytest.fixture(scope="module")
def served(trained_run):
    """URL of the API with the real engine over the trained run's history."""
    from trainer_core.runs.job import JobRunner
    from trainer_core.runs.store import RunStore
    from trainer_core.serving.engine import ChatEngine

    settings = trained_run.settings.model_copy(update={"api_token": SecretStr(TOKEN)})
    runner = JobRunner(runs_dir=settings.runs_dir, store=RunStore(trained_run.db_path))
    engine = ChatEngine(runner, settings)
    with ServerThread(api_app(settings, runner, engine)) as server:
        yield server.url.rstrip("/")
        engine.unload()


def test_the_trained_model_answers_through_the_openai_client(served, trained_run):
    client = openai.OpenAI(base_url=f"{served}/v1", api_key=TOKEN, max_retries=0, timeout=300)
    ids = [m.id for m in client.models.list()]
    assert ids[0] == "base" and trained_run.job_id in ids and f"{trained_run.job_id}/checkpoint-2" in ids
    reply = client.chat.completions.create(model=trained_run.job_id, messages=QUESTION, temperature=0, max_tokens=12)
    text = reply.choices[0].message.content
    assert text.strip() and reply.choices[0].finish_reason in ("stop", "length")
    assert reply.usage.prompt_tokens > 5 and 0 < reply.usage.completion_tokens <= 12
    chunks = list(
        client.chat.completions.create(
            model=trained_run.job_id,
            messages=QUESTION,
            temperature=0,
            max_tokens=12,
            stream=True,
            stream_options={"include_usage": True},
        )
    )
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == text  # greedy: the same answer
    assert chunks[-1].usage.completion_tokens == reply.usage.completion_tokens


def test_a_share_link_serves_one_checkpoint(served, trained_run):
    checkpoint = f"{trained_run.job_id}/checkpoint-2"
    created = httpx.post(
        f"{served}/api/train/share",
        json={"model": checkpoint},
        headers={"Authorization": f"Bearer {TOKEN}"},
        timeout=30,
    )
    assert created.status_code == 201, created.text
    link = created.json()
    client = openai.OpenAI(base_url=served + link["api_base_path"], api_key="unused", max_retries=0, timeout=300)
    assert [m.id for m in client.models.list()] == [checkpoint]
    reply = client.chat.completions.create(model=checkpoint, messages=QUESTION, temperature=0, max_tokens=8)
    assert reply.choices[0].message.content.strip()
    with pytest.raises(openai.NotFoundError):
        client.chat.completions.create(model=trained_run.job_id, messages=QUESTION, max_tokens=8)
    page = httpx.get(served + link["url_path"], timeout=30)
    assert page.status_code == 200 and "checkpoint-2" in page.text


def test_the_codex_style_round_trip_with_the_tuned_run(served, trained_run):
    """``responses.create``: the forced call (required, then the function named), its result sent
    back, a final answer in words; the forced calls are the same call (greedy, one function)."""
    client = openai.OpenAI(base_url=f"{served}/v1", api_key=TOKEN, max_retries=0, timeout=300)
    first, final = codex_round_trip(client, trained_run.job_id, "required")
    named, _ = codex_round_trip(client, trained_run.job_id, {"type": "function", "name": "get_weather"})
    assert named.output[0].arguments == first.output[0].arguments
    print("round trip with the tuned run:", first.output[0].arguments, "->", repr(final.output_text))


def test_text_format_json_schema_is_followed(served, trained_run):
    client = openai.OpenAI(base_url=f"{served}/v1", api_key=TOKEN, max_retries=0, timeout=300)
    schema = {
        "type": "object",
        "properties": {"name": {"type": "string", "maxLength": 30}, "age": {"type": "integer", "minimum": 0}},
        "required": ["name", "age"],
        "additionalProperties": False,
    }
    shape = {"type": "json_schema", "name": "person", "schema": schema, "strict": True}
    reply = client.responses.create(
        model=trained_run.job_id,
        input="Who are you? Answer as JSON.",
        text={"format": shape},
        temperature=0,
        max_output_tokens=60,
    )
    assert reply.status == "completed" and reply.text.format.name == "person"
    answer = json.loads(reply.output_text)
    assert set(answer) == {"name", "age"} and isinstance(answer["age"], int) and answer["age"] >= 0
