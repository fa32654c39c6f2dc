"""``POST /v1/embeddings`` over the real chat engine and inference worker (the API alone on a
loopback port): the ``openai`` client's vectors of 32 sentences equal ``load_embedder(folder).encode``
(a LoRA embedding run of the tiny encoder), base64 and float alike, ``dimensions`` cut and
re-normalised, usage counted, through a share link too; and, raw HTTP as an attacker would send it,
every refusal a 4xx in OpenAI's error shape (no token, another model's link, odd or huge input,
unknown and path-like ids, a chat model asked for embeddings and the other way round), never a 500."""

from __future__ import annotations

import json

import httpx
import numpy as np
import openai
import pytest

from tests.e2e.conftest import TOKEN, ServerThread
from tests.support.chat_server import api_app
from tests.support.embedding_runs import add_run, lora_embedding_run

EMB = "job_20250106_090000_4a4b4c4d"  # a LoRA run of the tiny encoder
CHAT = "job_20250105_090000_5a5b5c5d"  # a chat run (fake adapter files: it is never loaded)
SENTENCES = [
    f"Sentence {i}: the {word} is {i * 7 % 13} metres from the station."
    for i, word in enumerate(["cat", "train", "tower", "river", "garden", "library", "bridge", "market"] * 4)
]


@pytest.fixture(scope="module")
def embedded(tmp_path_factory, tiny_encoder_dir):
    """(url, settings) of the API with a real engine, the run ``EMB`` (newest: ``base`` is its base
    encoder) and the chat run ``CHAT``."""
    from tests.support import fake_workers
    from trainer_core.runs.job import JobRunner
    from trainer_core.runs.store import RunStore
    from trainer_core.serving.engine import ChatEngine
    from trainer_core.settings import Settings

    settings = Settings(
        data_dir=tmp_path_factory.mktemp("embed"), api_token=TOKEN, allowed_paths=str(tiny_encoder_dir.parent)
    )
    store = RunStore(settings.db_path)
    chat = settings.runs_dir / CHAT
    chat.mkdir(parents=True)
    (chat / "adapter_model.safetensors").write_bytes(b"w")
    (chat / "adapter_config.json").write_text(json.dumps({"base_model_name_or_path": "org/base"}))
    store.create_run(CHAT, {"model_name": "org/base"}, str(chat), "completed")
    add_run(store, EMB, lora_embedding_run(tiny_encoder_dir, settings.runs_dir / EMB), str(tiny_encoder_dir))
    runner = JobRunner(worker_target=fake_workers.stepping_worker, runs_dir=settings.runs_dir, store=store)
    engine = ChatEngine(runner, settings)  # the real inference worker
    with ServerThread(api_app(settings, runner, engine)) as server:
        yield server.url.rstrip("/"), settings
        engine.unload()
        runner.stop(save=False)
        runner.wait(10)


def _error(response: httpx.Response, status: int) -> dict:
    assert response.status_code == status, response.text
    assert set(response.json()) == {"error"} and "Traceback" not in response.text
    return response.json()["error"]


def _link(url: str, model: str) -> str:
    made = httpx.post(f"{url}/api/train/share", json={"model": model}, headers={"Authorization": f"Bearer {TOKEN}"})
    assert made.status_code == 201, made.text
    return made.json()["api_base_path"]


@pytest.mark.slow
def test_the_openai_client_gets_the_runs_vectors_through_the_token_and_a_share_link(embedded, tiny_encoder_dir):
    from trainer_core.kinds.embedding.loading import load_embedder

    url, settings = embedded
    client = openai.OpenAI(base_url=f"{url}/v1", api_key=TOKEN, max_retries=0)
    listed = {m.id: m.serves for m in client.models.list()}
    assert listed == {"base": "embeddings", EMB: "embeddings", CHAT: "chat"}
    model = load_embedder(settings.runs_dir / EMB)
    expected = model.encode(SENTENCES)  # (32, 64)
    got = client.embeddings.create(model=EMB, input=SENTENCES)  # the client asks for base64 and decodes it
    vectors = np.array([d.embedding for d in got.data])
    cosines = (vectors * expected).sum(1) / np.linalg.norm(vectors, axis=1) / np.linalg.norm(expected, axis=1)
    assert vectors.shape == (32, 64) and cosines.min() >= 0.999 and [d.index for d in got.data] == list(range(32))
    floats = client.embeddings.create(model=EMB, input=SENTENCES, encoding_format="float")
    assert np.abs(np.array([d.embedding for d in floats.data]) - vectors).max() < 1e-6
    tokens = sum(len(model.tokenizer(s)["input_ids"]) for s in SENTENCES)
    assert got.usage.prompt_tokens == got.usage.total_tokens == tokens
    cut = np.array(client.embeddings.create(model=EMB, input=SENTENCES[:3], dimensions=16).data[0].embedding)
    assert cut.shape == (16,) and abs(np.linalg.norm(cut) - 1) < 1e-5
    assert np.allclose(cut, vectors[0, :16] / np.linalg.norm(vectors[0, :16]), atol=1e-5)
    one = client.embeddings.create(model="base", input="just one text")
    assert len(one.data) == 1 and np.allclose(
        one.data[0].embedding, load_embedder(tiny_encoder_dir).encode(["just one text"])[0], atol=1e-5
    )
    big = httpx.post(
        f"{url}/v1/embeddings",
        headers={"Authorization": f"Bearer {TOKEN}"},
        json={"model": EMB, "input": "x", "dimensions": 65},
    )
    assert _error(big, 400)["param"] == "dimensions" and "vectors of 64 values" in big.json()["error"]["message"]
    shared = openai.OpenAI(base_url=url + _link(url, EMB), api_key="unused", max_retries=0)
    assert [m.id for m in shared.models.list()] == [EMB]
    via_link = shared.embeddings.create(model=EMB, input=SENTENCES[:4], encoding_format="float")
    assert np.abs(np.array([d.embedding for d in via_link.data]) - vectors[:4]).max() < 1e-6


def test_refusals_are_4xx_in_openai_shape(embedded):
    url, _ = embedded
    auth = {"Authorization": f"Bearer {TOKEN}"}

    def post(body, headers=auth, path="/v1/embeddings", **kwargs):
        return httpx.post(f"{url}{path}", headers=headers, json=body, timeout=30, **kwargs)

    assert _error(post({"model": EMB, "input": "a"}, headers={}), 401)["code"] == "invalid_api_key"
    assert _error(post({"model": EMB, "input": "a"}, headers={"Authorization": "Bearer nope"}), 401)
    for model in ("job_nope", "../../etc/passwd", "/etc/passwd", f"{EMB}/../../x", f"{EMB}/checkpoint-../1", "\u0000"):
        error = _error(post({"model": model, "input": "a"}), 404)
        assert error["code"] == "model_not_found" and error["param"] == "model"
    chat_model = _error(post({"model": CHAT, "input": "a"}), 400)
    assert chat_model["code"] == "not_an_embedding_model" and chat_model["param"] == "model"
    chat_on_embedder = _error(
        post({"model": EMB, "messages": [{"role": "user", "content": "hi"}]}, path="/v1/chat/completions"), 400
    )
    assert chat_on_embedder["code"] == "embedding_model"
    for body, param in (
        ({"model": EMB, "input": [1, 2, 3]}, "input"),  # token ids
        ({"model": EMB, "input": [[1, 2], [3]]}, "input"),
        ({"model": EMB, "input": []}, "input"),
        ({"model": EMB, "input": ["ok", ""]}, "input"),
        ({"model": EMB, "input": ["x"] * 2049}, "input"),
        ({"model": EMB, "input": "y" * 40_000}, "input"),
        ({"model": EMB, "input": {"text": "a"}}, "input"),
        ({"model": EMB}, "input"),
        ({"input": "a"}, "model"),
        ({"model": EMB, "input": "a", "encoding_format": "int8"}, "encoding_format"),
        ({"model": EMB, "input": "a", "dimensions": 0}, "dimensions"),
        ({"model": EMB, "input": "a", "dimensions": True}, "dimensions"),
        ({"model": EMB, "input": "a", "dimensions": 10**12}, "dimensions"),
        ({"model": "m" * 301, "input": "a"}, "model"),
    ):
        assert _error(post(body), 400)["param"] == param, body
    tokens = _error(post({"model": EMB, "input": [1, 2]}), 400)
    assert tokens["code"] == "token_input_not_supported" and "send the text" in tokens["message"]
    too_many = _error(post({"model": EMB, "input": ["x"] * 2049}), 400)
    assert "at most 2048 texts" in too_many["message"]
    surrogate = json.dumps({"model": EMB, "input": ["ok", "a\ud800b"]}).encode()  # JSON's escape: valid JSON
    lone = _error(httpx.post(f"{url}/v1/embeddings", headers=auth, content=surrogate, timeout=30), 400)
    assert lone["message"] == "the body must be a JSON object with at least model and input"  # refused as it is read
    not_json = httpx.post(f"{url}/v1/embeddings", headers=auth, content=b"{nope", timeout=30)
    assert _error(not_json, 400)
    deep = httpx.post(f"{url}/v1/embeddings", headers=auth, content=b"[" * 100_000 + b"]" * 100_000, timeout=30)
    assert 400 <= deep.status_code < 500 and "error" in deep.json()
    other = _link(url, CHAT)  # a link opens only its own model
    assert _error(post({"model": EMB, "input": "a"}, headers={}, path=f"{other}/embeddings"), 404)["code"] == (
        "model_not_found"
    )
    assert _error(post({"input": "a"}, headers={}, path=f"{other}/embeddings"), 400)["code"] == "not_an_embedding_model"
    forged = other.replace(other.split("/")[2], "0123456789abcdef." + "A" * 43)
    assert _error(post({"input": "a"}, headers={}, path=f"{forged}/embeddings"), 403)["code"] == "invalid_share_link"
