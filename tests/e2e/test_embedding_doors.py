"""An embedding run's Start door tried as a careless user and an attacker would (raw HTTP, the whole
app with its token and check worker, a fake stepping worker): pair files whose texts are lists,
objects or missing, whose scores are words; a model folder whose module is a link out of it; a
LoRA folder whose adapter names a base outside the allowed folders. Each a 400 naming the field
(and the file's row), never a traceback; nothing starts and nothing outside is read."""

from __future__ import annotations

import json
import os
import shutil

import httpx
import pytest

from tests.e2e.conftest import AUTH, CANARY, TOKEN, ServerThread, allowed

pytestmark = pytest.mark.slow  # the app's check worker: a process


@pytest.fixture(scope="module")
def doors(tmp_path_factory, tiny_encoder_dir):
    """(client, runner, allowed folder, outside folder): the app allowing ``allowed`` only."""
    from server import build_app
    from tests.support import fake_workers
    from trainer_core.runs.job import JobRunner
    from trainer_core.runs.store import RunStore
    from trainer_core.settings import Settings

    inside, outside = tmp_path_factory.mktemp("inside"), tmp_path_factory.mktemp("outside")
    shutil.copytree(tiny_encoder_dir, outside / "base")
    (outside / "secret").mkdir()
    (outside / "secret" / "config.json").write_text(json.dumps({"pooling_mode": CANARY}))
    settings = Settings(data_dir=inside / "data", allowed_paths=allowed(inside), api_token=TOKEN)
    runner = JobRunner(
        worker_target=fake_workers.stepping_worker, runs_dir=settings.runs_dir, store=RunStore(settings.db_path)
    )
    with ServerThread(build_app(settings, runner)) as server:
        # the first Start waits for the check worker's start (torch imported): minutes on a loaded machine
        yield httpx.Client(base_url=server.url.rstrip("/"), headers=AUTH, timeout=300), runner, inside, outside
        runner.stop(save=False)
        runner.wait(10)


def _rows(folder, name, rows):
    path = folder / name
    path.write_text("\n".join(json.dumps(row) for row in rows), encoding="utf-8")
    return str(path)


def _refused(client, body, field):
    answer = client.post("/api/train/start", json={"is_embedding": True, "max_steps": 2, **body})
    assert answer.status_code == 400, answer.text
    assert "Traceback" not in answer.text and CANARY not in answer.text
    assert field in answer.text, answer.text
    return answer.text


def test_embedding_data_and_model_folders_that_cannot_be_used_are_refused_at_start(doors, tiny_encoder_dir):
    client, runner, inside, outside = doors
    model = inside / "encoder"
    shutil.copytree(tiny_encoder_dir, model)
    good = [{"anchor": f"q{i}", "positive": f"p{i}"} for i in range(8)]
    for rows, words in (
        ([{"anchor": ["a", "b"], "positive": f"p{i}"} for i in range(4)], "row 1: column anchor holds a list"),
        ([*good, {"anchor": "a", "positive": None}], "row 9: column positive is empty"),
        ([{"sentence1": "a", "sentence2": "b", "score": "high"}] * 4, "row 1: score 'high' is not a number"),
    ):
        data = _rows(inside, "bad.jsonl", rows)
        assert words in _refused(client, {"model_name": str(model), "local_datasets": [data]}, "embedding_columns")
    data = _rows(inside, "pairs.jsonl", good)
    linked = inside / "linked"
    shutil.copytree(tiny_encoder_dir, linked)
    shutil.rmtree(linked / "1_Pooling")
    os.symlink(outside / "secret", linked / "1_Pooling")  # the module read from outside the allowed folder
    text = _refused(client, {"model_name": str(linked), "local_datasets": [data]}, "model_name")
    assert "outside the model's folder" in text
    lora = inside / "lora"
    shutil.copytree(tiny_encoder_dir, lora)
    (lora / "adapter_config.json").write_text(json.dumps({"base_model_name_or_path": str(outside / "base")}))
    text = _refused(client, {"model_name": str(lora), "local_datasets": [data]}, "model_name")
    assert "base_model_name_or_path" in text and "outside the allowed folders" in text
    assert not runner.status().is_training_running and runner.store.list_runs() == []  # nothing started
