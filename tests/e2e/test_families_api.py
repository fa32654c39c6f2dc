"""Every family through the HTTP API of the real app process, with the defaults: Start trains 2
LoRA steps, the run's run.json names the adapted projections, and for the families with unusual
layouts the OpenAI-compatible ``/v1`` answers through the real ``openai`` client (the fixtures carry
the bundled ChatML template; template quirks are tested in ``tests/trainer_core/data/test_template_fit.py``)."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import openai
import pytest

from tests.e2e.conftest import wait_for
from tests.support.api_server import API_AUTH as AUTH
from tests.support.api_server import API_TOKEN as TOKEN
from tests.support.api_server import app_for
from tests.support.families import FAMILIES, build_family_model, family_model
from trainer_core.models.targets import resolve_targets

pytestmark = pytest.mark.slow
THROUGH_V1 = ("gpt2", "phi3", "gemma2", "qwen3_moe", "gpt_oss")


@pytest.fixture(scope="module")
def app_proc(api_app, tiny_model_dir):
    """The launched app the HTTP tests share (``api_app``; each test waits for its run's end);
    ``models`` holds the families."""
    app = app_for(api_app, "families")
    app.models, app.tokenizer_dir = app.folder / "models", tiny_model_dir
    return app


@pytest.mark.parametrize("family", FAMILIES)
def test_each_family_trains_over_http_with_the_defaults(app_proc, datasets_dir, family):
    model = build_family_model(family, app_proc.tokenizer_dir, app_proc.models / family)
    api = httpx.Client(base_url=app_proc.url, headers=AUTH, timeout=30)
    body = {
        "model_name": str(model),
        "local_datasets": [str(datasets_dir / "alpaca_en_demo.json")],
        "max_steps": 2,
        "batch_size": 2,
        "max_seq_length": 64,
        "dataset_slice_end": 8,
    }
    started = api.post("/api/train/start", json=body)
    assert started.status_code == 200 and started.json()["status"] == "queued", started.text
    wait_for(lambda: not api.get("/api/train/status").json()["is_training_running"], 300, "the run's end")
    status = api.get("/api/train/status").json()
    assert status["phase"] == "completed", (status["message"], status["error"])
    structure = json.loads((Path(status["details"]["output_dir"]) / "run.json").read_text())["model_structure"]
    expected = resolve_targets(
        family_model(family), ["all-linear"]
    )  # every block projection (tests/trainer_core/models/test_targets.py)
    assert structure["adapted"]["modules"] == list(expected.modules)
    assert sorted(structure["adapted"]["parameters"]) == sorted(expected.parameters)
    assert structure["adapted"]["count"] == expected.count
    assert structure["attention"] in ("sdpa_varlen", "sdpa", "eager")
    assert structure["padding_free"] == (family != "gpt_oss")  # its masks ignore packed rows' positions
    if family in THROUGH_V1:
        client = openai.OpenAI(base_url=f"{app_proc.url}/v1", api_key=TOKEN, max_retries=0, timeout=120)
        answer = client.chat.completions.create(
            model=started.json()["job_id"],
            messages=[{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi."}],
            max_tokens=6,
            temperature=0,
        )
        assert answer.usage.completion_tokens > 0 and isinstance(answer.choices[0].message.content, str)
