"""The app's doors tried as an attacker would: raw HTTP and raw Gradio queue calls against the whole app
(API + UI, login and token on), with a fake worker so each test takes seconds. A canary file outside
every allowed folder must never be read, copied or reported; studio folders are never deleted."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import httpx
import pytest

from tests.e2e.conftest import (
    AUTH,
    CANARY,
    PASSWORD,
    TOKEN,
    USER,
    ServerThread,
    alpaca,
    api,
    assert_no_canary,
    form_args,
    idle,
    logged_in,
    snapshot,
    wait_for,
)
from tests.support.raw_gradio import PREVIEW_OUTPUTS, RawGradio, error_text, file_value

HF_TOKEN = "hf_SecretThatMustNeverEcho42"


# 1. File values that the server never received ---------------------------------------------------
def test_upload_value_must_be_a_received_upload(studio, outside, datasets_dir):
    settings, runner, url = studio
    raw = RawGradio(logged_in(url))
    start, preview = raw.fn_index("start"), raw.fn_index(inputs_like="start", outputs=PREVIEW_OUTPUTS)
    before = snapshot(outside)
    license_file = next(Path(os.__file__).parent.parent.glob("LICENSE*"), Path(os.__file__))
    link = settings.uploads_dir / "link.jsonl"
    settings.uploads_dir.mkdir(parents=True, exist_ok=True)
    link.symlink_to(outside / "canary.jsonl")
    for target in (outside / "canary.jsonl", license_file, link, settings.uploads_dir / ".." / ".." / "x.json"):
        shown = raw.call(
            preview,
            [file_value(str(target)), "", "auto", "", "HuggingFaceTB/SmolLM2-135M-Instruct", 512, "sft"],
            pad=True,
        )
        text = json.dumps(shown)
        assert CANARY not in text and "not uploaded" in text, text[:500]
        started = raw.call(start, [file_value(str(target)), *form_args("")[1:]], pad=True)
        assert "not uploaded" in json.dumps(started) and not runner.status().is_training_running, started
    assert runner.status().phase.value == "idle"
    assert snapshot(outside) == before
    assert sorted(p.name for p in settings.uploads_dir.iterdir()) == ["link.jsonl"]
    assert_no_canary(settings.data_dir)


def test_a_real_upload_is_kept_under_a_content_name(studio, datasets_dir):
    settings, runner, url = studio
    client = logged_in(url)
    with open(datasets_dir / "identity.json", "rb") as fh:
        uploaded = client.post("/gradio_api/upload", files={"files": ("identity.json", fh)}).json()[0]
    raw = RawGradio(client)
    shown = raw.call(
        raw.fn_index(inputs_like="start", outputs=PREVIEW_OUTPUTS),
        [file_value(uploaded), "", "auto", "", "HuggingFaceTB/SmolLM2-135M-Instruct", 512, "sft"],
        pad=True,
    )
    assert "Detected format: **alpaca**" in json.dumps(shown)
    started = raw.call(raw.fn_index("start"), [file_value(uploaded), *form_args("", max_steps=3)[1:]], pad=True)
    assert started["success"], started
    idle(runner)
    kept = [p.name for p in settings.uploads_dir.glob("identity-*.json")]
    assert len(kept) == 1 and len(kept[0]) == len("identity-") + 12 + len(".json")


# 2 and 10. Output folders and Delete -------------------------------------------------------------
def test_output_dir_never_a_studio_folder_or_another_runs(studio, datasets_dir):
    settings, runner, url = studio
    client = api(url)
    body = {"local_datasets": [alpaca(datasets_dir)], "max_steps": 3}
    for folder in (settings.data_dir, settings.uploads_dir, settings.runs_dir, datasets_dir):
        refused = client.post("/api/train/start", json=body | {"output_dir": str(folder)})
        assert refused.status_code == 400 and "output_dir" in refused.text, refused.text
    first = client.post("/api/train/start", json=body | {"output_dir": str(settings.data_dir / "mine")}).json()
    assert first["status"] == "queued"
    idle(runner)
    again = client.post("/api/train/start", json=body | {"output_dir": str(settings.data_dir / "mine")})
    assert again.status_code == 400 and first["job_id"] in again.text and "new or empty folder" in again.text
    nested = client.post("/api/train/start", json=body | {"output_dir": str(settings.data_dir / "mine" / "sub")})
    assert nested.status_code == 400 and "another run" in nested.text and first["job_id"] in nested.text


def test_delete_removes_only_what_the_run_wrote(studio, datasets_dir):
    settings, runner, url = studio
    client = api(url)
    settings.uploads_dir.mkdir(parents=True, exist_ok=True)
    (settings.uploads_dir / "someones-upload.json").write_text("[]")
    job = client.post("/api/train/start", json={"local_datasets": [alpaca(datasets_dir)], "max_steps": 3}).json()
    assert job["status"] == "queued", job
    wait_for(lambda: not runner.status().is_training_running, 30, "the fake run")
    folder = settings.runs_dir / job["job_id"]
    (folder / "notes-of-the-user.txt").write_text("keep me")
    # A run recorded (by an older version) with the data dir itself as its output folder.
    runner.store.create_run("job_legacy", {"max_steps": 1}, str(settings.data_dir), "completed")
    raw = RawGradio(logged_in(url))
    delete = raw.fn_index("delete_run")
    assert raw.call(delete, ["job_legacy"])["success"]
    assert settings.db_path.is_file() and (settings.uploads_dir / "someones-upload.json").is_file() and folder.is_dir()
    assert runner.store.get_run("job_legacy") is None
    assert raw.call(delete, [job["job_id"]])["success"]
    assert sorted(p.name for p in folder.iterdir()) == ["notes-of-the-user.txt"]
    assert runner.store.get_run(job["job_id"]) is None


# 3 and 4. Hub ids are not local folders; model folders obey the path rules -----------------------
def test_hf_dataset_is_a_hub_id_and_model_name_obeys_the_path_rules(studio, outside, datasets_dir):
    settings, runner, url = studio
    client = api(url)
    last_job = runner.status().job_id
    for value in (str(outside), "../outside", "/etc", "a/b/c"):
        refused = client.post("/api/train/start", json={"hf_dataset": value})
        assert refused.status_code == 422 and "hf_dataset" in refused.text and "Hub id" in refused.text
    body = {"local_datasets": [alpaca(datasets_dir)], "max_steps": 2}
    for name in ("HuggingFaceTB/Smol\x00LM2", "two words/x", "org/model/extra"):  # the check and Start agree
        checked = client.post("/api/train/preflight", json=body | {"model_name": name})
        started = client.post("/api/train/start", json=body | {"model_name": name})
        assert checked.status_code == started.status_code == 400, (name, checked.text, started.text)
        assert checked.json()["detail"] == started.json()["detail"] and "model_name" in checked.text
    existing = client.post("/api/train/start", json=body | {"model_name": str(outside / "model")})
    missing = client.post("/api/train/start", json=body | {"model_name": str(outside / "no-such-model")})
    assert existing.status_code == missing.status_code == 400
    assert existing.json()["detail"].replace(str(outside / "model"), "P") == missing.json()["detail"].replace(
        str(outside / "no-such-model"), "P"
    )
    assert CANARY not in existing.text and "config.json" not in existing.text
    inside = settings.data_dir / "not-a-model"
    inside.mkdir(exist_ok=True)
    no_config = client.post("/api/train/start", json=body | {"model_name": str(inside)})
    assert no_config.status_code == 400 and "no config.json" in no_config.text
    t0 = time.monotonic()
    offline = client.post("/api/train/start", json=body | {"model_name": "someone/not-cached-model"})
    assert offline.status_code == 400 and "cannot be reached" in offline.text and time.monotonic() - t0 < 10
    offline_ds = client.post("/api/train/start", json={"hf_dataset": "someone/not-cached-data", "max_steps": 2})
    assert offline_ds.status_code == 400 and "hf_dataset" in offline_ds.text
    huge = client.post("/api/train/start", json=body | {"model_name": "m" * 5_000_000})
    assert huge.status_code == 422 and len(huge.text) < 2000 and "model_name" in huge.text
    assert runner.status().job_id == last_job  # nothing was started


# 5-8. Secrets, logins and the API description ----------------------------------------------------
def test_tokens_are_checked_and_never_echoed(studio, datasets_dir):
    settings, runner, url = studio
    plain = httpx.Client(base_url=url, timeout=30)
    for header in ("Bearer", "bearer", f"Basic {TOKEN}", f"Bearer {TOKEN[:-1]}", f"Bearer {TOKEN}x", f"Token {TOKEN}"):
        assert plain.get("/api/train/status", headers={"Authorization": header}).status_code == 401
    client = api(url)
    bad = client.post(
        "/api/train/start", json={"local_datasets": [alpaca(datasets_dir)], "learning_rate": 5, "hf_token": HF_TOKEN}
    )
    assert bad.status_code == 422 and "learning_rate" in bad.text
    assert HF_TOKEN not in bad.text and TOKEN not in bad.text
    wrong_type = client.post("/api/train/start", json={"hf_token": {"x": HF_TOKEN}})
    assert wrong_type.status_code == 422 and HF_TOKEN not in wrong_type.text
    # the seed API's W&B key is a secret too: refused requests, a bad type, a refused Start
    for body in (
        {"local_datasets": [alpaca(datasets_dir)], "learning_rate": 5, "wandb_token": HF_TOKEN},
        {"wandb_token": {"x": HF_TOKEN}},
        {"local_datasets": [alpaca(datasets_dir)], "enable_wandb": False, "wandb_token": HF_TOKEN},
    ):
        answer = client.post("/api/train/start", json=body)
        assert answer.status_code == 422 and HF_TOKEN not in answer.text, answer.text[:300]
    refused = client.post(  # wandb is not installed here: a clear 400, the key nowhere
        "/api/train/start", json={"local_datasets": [alpaca(datasets_dir)], "max_steps": 1, "wandb_token": HF_TOKEN}
    )
    assert refused.status_code == 400 and "pip install wandb" in refused.text and HF_TOKEN not in refused.text


def test_api_description_needs_the_login_or_token(studio):
    settings, runner, url = studio
    plain = httpx.Client(base_url=url, timeout=30)
    for path in ("/openapi.json", "/docs", "/config", "/gradio_api/info", "/gradio_api/openapi.json"):
        assert plain.get(path).status_code == 401, path
    for path in ("/", "/gradio_api/runs", "/gradio_api/anything", "/gradio_api/"):
        page = plain.get(path).text
        assert "/load_settings" not in page and "learning_rate" not in page, path
        assert '"named_endpoints": {}' in page or "gradio_api_info" not in page, path
    assert api(url).get("/openapi.json").json()["components"]["schemas"]["TrainingStartRequest"]
    assert logged_in(url).get("/docs").status_code == 200


# 11. Bad requests are 4xx that name the field ----------------------------------------------------
def test_nan_infinity_and_huge_paths_are_422(studio, datasets_dir):
    settings, runner, url = studio
    client = api(url)
    for literal in ("NaN", "Infinity", "-Infinity"):
        body = f'{{"local_datasets": ["{alpaca(datasets_dir)}"], "learning_rate": {literal}}}'
        answer = client.post("/api/train/start", content=body, headers={"Content-Type": "application/json"})
        assert answer.status_code == 422 and "learning_rate" in answer.text
        assert client.get("/api/train/status").status_code == 200  # the connection still works
    for field in ("local_datasets", "local_eval_datasets"):
        answer = client.post("/api/train/start", json={"local_datasets": ["a.json"], field: ["/" + "a" * 100_000]})
        assert answer.status_code == 422 and field in answer.text and len(answer.text) < 3000
    long_name = client.post("/api/train/start", json={"local_datasets": [str(settings.data_dir / ("n" * 300))]})
    assert long_name.status_code == 400 and "longer than 255 bytes" in long_name.text
    nul = client.post("/api/train/start", json={"local_datasets": ["a\u0000b.json"]})
    assert nul.status_code == 400 and "local_datasets" in nul.text


def test_failed_logins_are_throttled_per_address(tmp_path, caplog):
    from server import build_app
    from trainer_core.settings import Settings

    settings = Settings(data_dir=tmp_path, username=USER, password=PASSWORD, api_token=TOKEN)
    with ServerThread(build_app(settings)) as server:
        client = httpx.Client(base_url=server.url.rstrip("/"), timeout=30)
        wrong = [client.post("/login", data={"username": USER, "password": f"guess-{i}"}).status_code for i in range(5)]
        assert wrong == [400] * 5
        blocked = client.post("/login", data={"username": USER, "password": PASSWORD})
        assert blocked.status_code == 429 and 1 <= int(blocked.headers["Retry-After"]) <= 60
        wrong_token = {"Authorization": "Bearer not-the-token"}
        assert client.get("/api/train/status", headers=wrong_token).status_code == 429  # same address, same keeper
        assert client.get("/api/train/status", headers=AUTH).status_code == 200  # the right token is no guess
    assert "guess-" not in caplog.text and PASSWORD not in caplog.text


@pytest.mark.slow
def test_concurrent_guesses_are_checked_at_most_limit_times(tmp_path):
    """300 wrong passwords / tokens / share links sent at the same moment from one address: at most
    the limit (5) are checked, the rest answered 429; the owner's right password works once the
    announced wait is over; the right API token is never held up by the guesses."""
    import asyncio

    from server import build_app
    from trainer_core.settings import Settings

    async def burst(url: str, method: str, path: str, **kwargs) -> list[int]:
        limits = httpx.Limits(max_connections=300)
        async with httpx.AsyncClient(base_url=url, timeout=60, limits=limits) as client:
            answers = await asyncio.gather(*(client.request(method, path, **kwargs) for _ in range(300)))
        return [answer.status_code for answer in answers]

    now = [1000.0]
    settings = Settings(data_dir=tmp_path, username=USER, password=PASSWORD, api_token=TOKEN)
    app = build_app(settings)
    with ServerThread(app) as server:
        url = server.url.rstrip("/")
        assert httpx.get(url + "/api/train/status", headers=AUTH, timeout=30).status_code == 200  # builds the stack
        wrong_login = {"data": {"username": USER, "password": "guess"}}
        doors = [
            ("POST", "/login", wrong_login),
            ("POST", "/api/train/stop", {"headers": {"Authorization": "Bearer wrong"}}),
            ("POST", "/v1/chat/completions", {"headers": {"Authorization": "Bearer wrong"}, "json": {}}),
            ("POST", "/s/forged-share-token/v1/chat/completions", {"json": {}}),
        ]
        throttle = _throttle_of(app)
        throttle._clock = lambda: now[0]
        for method, path, kwargs in doors:
            codes = asyncio.run(burst(url, method, path, **kwargs))
            checked = [code for code in codes if code != 429]
            assert len(checked) <= 5 and codes.count(429) >= 295, (path, sorted(set(codes)))
            right = httpx.get(url + "/api/train/status", headers=AUTH, timeout=30)
            assert right.status_code == 200  # the token's owner is not locked out by the guesses
            blocked = httpx.post(url + "/login", data={"username": USER, "password": PASSWORD}, timeout=30)
            assert blocked.status_code == 429
            now[0] += int(blocked.headers["Retry-After"]) + 1  # the announced wait, on the throttle's clock
            assert httpx.post(url + "/login", data={"username": USER, "password": PASSWORD}).status_code == 200


def _throttle_of(app):
    """The ``FailureThrottle`` inside ``app``'s middleware stack (built on the first request)."""
    from api.throttle import ThrottleMiddleware

    layer = app.middleware_stack
    while layer is not None and not isinstance(layer, ThrottleMiddleware):
        layer = getattr(layer, "app", None)
    assert layer is not None
    return layer.throttle


def test_a_body_nested_thousands_deep_is_a_bad_request_at_every_json_door(studio):
    settings, runner, url = studio
    client = api(url)
    deep = "[" * 100_000 + "]" * 100_000
    nested = '{"model": "base", "messages": ' + deep + "}"
    for path in ("/v1/chat/completions", "/api/train/start", "/api/train/preflight", "/api/train/queue"):
        for body in (deep, nested):
            answer = client.post(path, content=body, headers={"Content-Type": "application/json"})
            assert answer.status_code in (400, 422), (path, answer.status_code, answer.text[:200])
            assert "Traceback" not in answer.text and len(answer.text) < 2000
    answer = client.post("/v1/chat/completions", content=deep, headers={"Content-Type": "application/json"})
    assert answer.json()["error"]["message"] == "There was an error parsing the body"


# Found by a break-it pass -----------------------------------------------------------------------
def test_loader_names_surrogates_and_paths_too_long_once_resolved(studio):
    settings, runner, url = studio
    client = api(url)
    for loader in ("json", "csv", "text", "parquet", "JSON"):
        answer = client.post("/api/train/start", json={"hf_dataset": loader})
        assert answer.status_code == 422 and "file loader" in answer.text, answer.text
    for field in ("local_datasets", "output_dir", "model_name", "resume_from_checkpoint"):
        value = '["\\ud800.json"]' if field == "local_datasets" else '"\\ud800x"'
        body = (
            f'{{"local_datasets": ["a.json"], "{field}": {value}}}'
            if field != "local_datasets"
            else f'{{"{field}": {value}}}'
        )
        answer = client.post("/api/train/start", content=body, headers={"Content-Type": "application/json"})
        assert 400 <= answer.status_code < 500, (field, answer.status_code, answer.text)
    deep = str(settings.data_dir) + "/" + "a/" * ((4094 - len(str(settings.data_dir))) // 2)
    for field in ("local_datasets", "output_dir"):
        value = [deep] if field == "local_datasets" else deep
        answer = client.post("/api/train/start", json={"local_datasets": ["a.json"], field: value})
        assert answer.status_code in (400, 422), (field, answer.status_code, answer.text[:300])


def test_gradio_routes_never_echo_a_secret(studio):
    settings, runner, url = studio
    client = logged_in(url)
    for route in ("/gradio_api/run/start", "/gradio_api/call/start"):
        answer = client.post(route, json={"data": {"hf_token": HF_TOKEN}})
        assert answer.status_code == 422 and HF_TOKEN not in answer.text, (route, answer.text[:300])
    joined = client.post(
        "/gradio_api/queue/join",
        content='{"fn_index": "\\ud800", "data": []}',
        headers={"Content-Type": "application/json"},
    )
    assert joined.status_code == 422


def test_no_event_echoes_or_logs_a_secret_however_malformed_the_call(studio, capfd, caplog):
    """Every event of the page that takes a token field (the form's Hugging Face token, the push's
    Hub token), called raw with one input short and with inputs of the wrong type: the errors name
    counts, fields and types, never the token, in the reply and in the log."""
    import logging

    settings, runner, url = studio
    raw = RawGradio(logged_in(url))
    secret_ids = {c["id"] for c in raw.config["components"] if c.get("props", {}).get("type") == "password"}
    shorted = 0
    with caplog.at_level(logging.DEBUG):
        for dependency in raw.dependencies:
            inputs = dependency["inputs"]
            if len(inputs) < 2 or not secret_ids & set(inputs):
                continue
            # the secret where the page sends one (the token fields), plain values elsewhere
            data = [HF_TOKEN if i in secret_ids else "x" for i in inputs]
            short = raw.call(dependency["id"], data[:-1] if inputs[-1] not in secret_ids else data[1:])
            assert HF_TOKEN not in json.dumps(short), (dependency.get("api_name"), error_text(short)[:300])
            if "didn't receive enough input values" in error_text(short):
                shorted += 1
            odd = raw.call(dependency["id"], [{"token": HF_TOKEN} if i in secret_ids else {"x": 1} for i in inputs])
            assert HF_TOKEN not in json.dumps(odd), (dependency.get("api_name"), error_text(odd)[:300])
    assert shorted >= 6  # start, check, queue add, settings save, command preview, push, ...
    captured = capfd.readouterr()
    assert HF_TOKEN not in captured.out + captured.err and HF_TOKEN not in caplog.text


def test_token_only_setup_still_guards_the_page(tmp_path, datasets_dir):
    from server import build_app
    from trainer_core.settings import Settings

    settings = Settings(data_dir=tmp_path, allowed_paths=str(datasets_dir), api_token=TOKEN)
    with ServerThread(build_app(settings)) as server:
        base = server.url.rstrip("/")
        stranger = httpx.Client(base_url=base, timeout=30)
        for path in ("/config", "/gradio_api/info", "/openapi.json"):
            assert stranger.get(path).status_code == 401, path
        assert '"named_endpoints": {}' in stranger.get("/").text
        joined = stranger.post("/gradio_api/queue/join", json={"data": [], "fn_index": 0, "session_hash": "x"})
        assert joined.status_code == 401
        user = httpx.Client(base_url=base, timeout=30)
        assert user.post("/login", data={"username": "anyone", "password": "wrong-token-value"}).status_code == 400
        assert user.post("/login", data={"username": "anyone", "password": TOKEN}).status_code == 200
        assert user.get("/config").status_code == 200


@pytest.mark.slow
def test_the_launched_app_ignores_forwarded_addresses_and_foreign_temp_files(tmp_path):
    from tests.e2e.conftest import free_port
    from tests.support.api_server import AppProcess

    env = {
        "STUDIO_DATA_DIR": str(tmp_path / "data"),
        "STUDIO_USERNAME": USER,
        "STUDIO_PASSWORD": PASSWORD,
        "STUDIO_API_TOKEN": TOKEN,
    }
    env.pop("GRADIO_TEMP_DIR", None)
    foreign = Path("/tmp/gradio/another-app") / "left-by-another-app.jsonl"
    foreign.parent.mkdir(parents=True, exist_ok=True)
    foreign.write_text(json.dumps({"instruction": CANARY, "input": "", "output": CANARY}) + "\n")
    proc = AppProcess(free_port(), env, tmp_path / "app.log").start()
    try:
        raw = RawGradio(logged_in(proc.url))  # a login that succeeds is no failure for the throttle below
        shown = raw.call(
            raw.fn_index(inputs_like="start", outputs=PREVIEW_OUTPUTS),
            [file_value(str(foreign)), "", "auto", "", "HuggingFaceTB/SmolLM2-135M-Instruct", 512, "sft"],
            pad=True,
        )
        assert CANARY not in json.dumps(shown) and "not uploaded" in json.dumps(shown)
        client = httpx.Client(base_url=proc.url, timeout=30)
        codes = [
            client.post(
                "/login", data={"username": USER, "password": f"guess-{i}"}, headers={"X-Forwarded-For": f"10.0.0.{i}"}
            ).status_code
            for i in range(7)
        ]
        assert codes[:5] == [400] * 5 and codes[5:] == [429, 429], codes
    finally:
        proc.stop()
        foreign.unlink()
    log = (tmp_path / "app.log").read_text()
    assert "refused an event's file value that was not uploaded" in log
    assert "Traceback" not in log and "InvalidPathError" not in log  # one line, not Gradio's traceback


# The chat and share events, tried as an attacker would (raw Gradio queue calls) --------------------------
def test_chat_and_share_events_refuse_ids_that_point_outside(studio, outside, datasets_dir):
    settings, runner, url = studio
    store = runner.store
    store.create_run("job_outside_chat", {"model_name": str(outside / "model")}, str(outside), "completed")
    (settings.data_dir / "evil").mkdir(exist_ok=True)
    (settings.data_dir / "evil" / "adapter_config.json").write_text(
        json.dumps({"base_model_name_or_path": str(outside / "model")})
    )
    (settings.data_dir / "evil" / "adapter_model.safetensors").write_bytes(b"x")
    store.create_run(
        "job_evil_base", {"model_name": str(outside / "model")}, str(settings.data_dir / "evil"), "completed"
    )
    raw = RawGradio(logged_in(url))
    chat, load, share = raw.fn_index("chat"), raw.fn_index("chat_load"), raw.fn_index("share_create")
    ids = [
        "../../etc",
        str(outside),
        str(outside / "model"),
        "/etc/passwd",
        "base/../x",
        "job_outside_chat",
        "job_outside_chat/checkpoint-1",
        "job_evil_base",
        "x" * 5000,
        "job_nope/../../../etc",
    ]
    settings_values = [24, 0, 0.9, 50, 1.0, 42]
    hostile = {"name": "f", "parameters": {"$ref": str(outside / "canary.jsonl"), "type": "object"}}
    hostile_tools = json.dumps([{"type": "function", "function": hostile}])
    for model_id in ids:
        for fn, data in (
            (load, [model_id]),
            # the four page states (the held image, the earlier turns' images, the held clip, the earlier
            # turns' clips): sent as an attacker would, they are ignored (a State's value is the session's);
            # then the voice of a text-to-speech model
            (
                chat,
                [
                    model_id,
                    False,
                    "",
                    "hi",
                    [],
                    [],
                    *settings_values,
                    *[str(outside / "canary.jsonl"), ["/etc"]] * 2,
                    0,
                    hostile_tools,  # the Tools box and Tool choice: a schema that points at a file
                    "required",
                ],
            ),
            (share, [model_id, None]),
        ):
            message = raw.call(fn, data)
            text = json.dumps(message)
            said = "Not loaded" in text or "Not sent" in text  # the Chat tab's refusals are notices on the page
            refused = said if fn in (chat, load) else not message.get("success") and error_text(message).strip()
            assert refused, (model_id, fn, text[:300])
            assert CANARY not in text and "Traceback" not in text
    assert app_engine(url, studio).state()["loaded"] is None  # nothing was loaded
    revoke = raw.call(raw.fn_index("share_revoke"), ["job_nope", "../../x"])
    assert "no share link" in error_text(revoke)
    stranger = RawGradio.__new__(RawGradio)
    stranger.client = httpx.Client(base_url=url, timeout=30)
    for fn in (chat, load, share):
        assert stranger.call(fn, ["base"])["status_code"] == 401
    assert_no_canary(settings.data_dir)


def app_engine(url: str, studio) -> object:
    """The ChatEngine of the ``studio`` app (the runner's ``before_start`` is its ``unload``)."""
    return studio[1].before_start.__self__


# The devices and processes settings, at every door ---------------------------------------
def test_the_seed_tensorboard_dir_obeys_the_path_rules(studio, outside, datasets_dir):
    settings, runner, url = studio
    client = api(url)
    last_job = runner.status().job_id
    body = {"local_datasets": [alpaca(datasets_dir)], "max_steps": 1, "enable_tensorboard": True}
    for value in (str(outside), str(settings.data_dir / ".." / ".." / "etc"), "tb\x00x"):
        answer = client.post("/api/train/start", json=body | {"tensorboard_dir": value})
        assert answer.status_code in (400, 422) and "tensorboard_dir" in answer.text, (value, answer.text[:300])
    contradicted = client.post("/api/train/start", json=body | {"enable_tensorboard": False, "tensorboard_dir": "x"})
    assert (
        contradicted.status_code == 422
        and "enable_tensorboard false disagrees with tensorboard_dir" in contradicted.text
    )
    assert runner.status().job_id == last_job  # nothing was started


def test_distributed_settings_are_checked_at_every_door(studio, outside, datasets_dir):
    settings, runner, url = studio
    client, raw = api(url), RawGradio(logged_in(url))
    last_job = runner.status().job_id
    body = {"local_datasets": [alpaca(datasets_dir)], "max_steps": 2, "num_processes": 2}
    for config in (str(outside / "canary.json"), "../" * 8 + "etc/passwd", str(outside / "missing.json")):
        refused = client.post(
            "/api/train/start", json=body | {"distributed": "deepspeed", "distributed_config": config}
        )
        assert refused.status_code == 400 and "distributed_config" in refused.text and CANARY not in refused.text
    inside = settings.data_dir / "missing-config.json"
    refused = client.post(
        "/api/train/start", json=body | {"distributed": "deepspeed", "distributed_config": str(inside)}
    )
    assert refused.status_code == 400 and "distributed_config: file not found" in refused.text
    for gpu_ids in ("0;id", "$(touch /tmp/x)", "0,1\n2"):
        refused = client.post("/api/train/start", json=body | {"gpu_ids": gpu_ids})
        assert refused.status_code == 422 and "gpu_ids" in refused.text and "GPU numbers" in refused.text
    too_many = client.post("/api/train/start", json=body | {"num_processes": 64})
    assert too_many.status_code == 400 and "num_processes (64) is more than" in too_many.text
    preflight = client.post(
        "/api/train/preflight", json=body | {"distributed": "fsdp", "distributed_config": str(outside / "canary.json")}
    )
    assert preflight.status_code == 400 and "distributed_config" in preflight.text and CANARY not in preflight.text
    preflight = client.post(
        "/api/train/preflight", json=body | {"num_processes": 64}
    )  # the check refuses as Start does
    assert preflight.status_code == 400 and "num_processes (64) is more than" in preflight.text
    start = raw.fn_index("start")
    for overrides, words in (
        (
            dict(num_processes=2, distributed="deepspeed", distributed_config=str(outside / "canary.json")),
            "Distributed config file",
        ),
        (dict(gpu_ids="0;id"), "GPU ids"),
        (dict(num_processes=64), "Processes (num_processes)"),
    ):
        answer = json.dumps(
            raw.call(start, [None, alpaca(datasets_dir), None, "", *form_args("", **overrides)[4:]], pad=True)
        )
        assert words in answer and CANARY not in answer, answer[:600]
    assert runner.status().job_id == last_job and not runner.status().is_training_running  # nothing was started


# The Ray and multi-machine settings, at every door ------------------------------------
def test_ray_and_machine_settings_are_checked_at_every_door(studio, outside, datasets_dir):
    settings, runner, url = studio
    client, raw = api(url), RawGradio(logged_in(url))
    last_job = runner.status().job_id
    body = {"local_datasets": [alpaca(datasets_dir)], "max_steps": 2, "compute": "ray", "ray_address": "127.0.0.1:1"}
    for storage in (str(outside), str(settings.data_dir / ".." / ".." / "etc"), "st\x00x", f"file://{outside}",
                    "s3://x/../../etc", "memory://x"):  # fmt: skip
        for route in ("/api/train/start", "/api/train/preflight"):
            refused = client.post(route, json=body | {"ray_storage_path": storage})
            assert refused.status_code in (400, 422) and "ray_storage_path" in refused.text, refused.text[:300]
            assert CANARY not in refused.text
    for fields, words in (
        ({"ray_address": "127.0.0.1:1; touch /tmp/x"}, "ray_address"),
        ({"compute": "local", "ray_storage_path": "s3://bucket/runs"}, "ray_storage_path are read only"),
        ({"compute": "local", "ray_address": None, "num_nodes": 2, "rdzv_endpoint": "$(id):1"}, "rdzv_endpoint"),
        ({"compute": "local", "ray_address": None, "node_rank": 3}, "node_rank"),
        ({"resources_per_worker": {"CPU": 0}}, "each worker must reserve something"),
        ({"ray_address": "127.0.0.1:99999"}, "port from 1 to 65535"),
    ):
        refused = client.post("/api/train/start", json=body | fields)
        assert refused.status_code == 422 and words in refused.text, (fields, refused.text[:300])
    nobody = client.post("/api/train/start", json=body)
    assert nobody.status_code == 400 and "ray_address: nothing answers at 127.0.0.1:1" in nobody.text
    start = raw.fn_index("start")
    overrides = dict(compute="ray", ray_address="127.0.0.1:1", ray_storage_path=str(outside))
    answer = json.dumps(
        raw.call(start, [None, alpaca(datasets_dir), None, "", *form_args("", **overrides)[4:]], pad=True)
    )
    assert "Ray storage path" in answer and CANARY not in answer, answer[:600]
    assert runner.status().job_id == last_job and not runner.status().is_training_running  # nothing was started


def test_send_tool_result_and_show_more_take_no_forged_value(studio, outside, datasets_dir):
    """*Send tool result* (the chat histories are the client's values) and the Runs tab's *Show more*
    (the table is the client's value), called raw: a model id outside, a history naming a file
    outside, histories of every wrong shape, a result too long, a table of 100,000 rows. Each is a
    notice or a refusal (never a traceback, never the canary), nothing is loaded, and *Show more*
    never lists more than the history holds."""
    from ui.chat_tools import CALL_TITLE
    from ui.run_filters import MAX_SHOWN

    settings, runner, url = studio
    raw = RawGradio(logged_in(url))
    send = raw.fn_index("chat_tool_result")
    wanted = len(next(d for d in raw.dependencies if d["id"] == send)["inputs"])

    def said(text: str) -> list[dict]:
        return [{"type": "text", "text": text}]

    call = {"role": "assistant", "content": said("get_weather({})"), "metadata": {"title": CALL_TITLE, "id": "c1"}}
    canary = {"type": "file", "file": file_value(str(outside / "canary.jsonl")), "alt_text": None}
    canary_file = {"role": "user", "content": [canary]}
    cases = [
        ("job_outside_chat", [call], "{}"),
        ("../../etc", [call], "{}"),
        ("base", [canary_file, call], "{}"),
        ("base", [{"role": "assistant", "content": said("x"), "metadata": "not a dict"}], "{}"),
        ("base", [{"role": "assistant", "content": ["a", {"b": 1}], "metadata": {"title": CALL_TITLE}}], ""),
        ("base", [{"role": "assistant", "content": said("f("), "metadata": {"title": CALL_TITLE, "id": None}}], ""),
        ("base", [{"role": "tool", "content": said("{}"), "metadata": {"title": CALL_TITLE, "id": ["x"]}}], "{}"),
        ("base", [call], "x" * 200_000),
        ("base", [], "{}"),
    ]
    for model_id, history, result in cases:
        data = [model_id, False, "", result, "", history, [], 24, 0, 0.9, 50, 1.0, 42]
        data = [*data, *[None] * (wanted - len(data) - 2), json.dumps([]), "auto"]
        message = raw.call(send, data)
        text = json.dumps(message)
        assert "Traceback" not in text and CANARY not in text, text[:300]
        said = "Not sent" in text or "Not loaded" in text or "no tool call waits" in text
        assert said or (not message.get("success") and error_text(message).strip()), (model_id, text[:300])
    assert app_engine(url, studio).state()["loaded"] is None  # nothing was loaded

    more = next(d["id"] for d in raw.dependencies if d["inputs"][-1:] == d["outputs"][:1] and len(d["inputs"]) == 4)
    for name in ("job_1", "x" * 300):
        runner.store.create_run(
            name[:200], {"model_name": "m"}, str(settings.data_dir / "runs" / name[:20]), "completed"
        )
    total = len(runner.store.list_runs())
    rows = [[f"job_{i}"] for i in range(100_000)]
    for filters, table in (
        (["", "all", ""], {"headers": ["job_id"], "data": rows, "metadata": None}),
        (["../../etc", "all", str(outside)], {"headers": ["job_id"], "data": [], "metadata": None}),
        ([None, None, None], "not a table"),
    ):
        message = raw.call(more, [*filters, table], timeout_s=120)
        text = json.dumps(message)
        assert "Traceback" not in text and CANARY not in text, text[:300]
        if message.get("success"):
            shown = message["output"]["data"][0]["data"]
            assert len(shown) <= min(total, MAX_SHOWN), len(shown)
        else:
            assert error_text(message).strip(), text[:300]
    assert_no_canary(settings.data_dir)
