"""What can be talked to: base, finished runs' final weights and complete checkpoints (newest
first, with steps and losses); clear refusals for runs without weights, deleted or foreign folders
and adapters on another base (fake weight files: nothing is loaded)."""

import json
import re
import shutil
import time
from pathlib import Path

import pytest

from trainer_core.request.model import DEFAULT_MODEL
from trainer_core.runs.store import RunStore
from trainer_core.serving.choices import list_choices, model_key, resolve_choice
from trainer_core.serving.errors import ChatInputError, UnknownModel
from trainer_core.settings import Settings
from trainer_core.status import TrainingProgress


@pytest.fixture
def settings(tmp_path):
    return Settings(data_dir=tmp_path / "data", models_dir=tmp_path / "models")


@pytest.fixture
def store(settings):
    store = RunStore(settings.db_path)
    yield store
    store.close()


def _adapter(folder: Path, base: str = "org/base") -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "adapter_model.safetensors").write_bytes(b"weights")
    (folder / "adapter_config.json").write_text(json.dumps({"base_model_name_or_path": base}))


def _checkpoint(folder: Path, step: int, base: str = "org/base") -> None:
    _adapter(folder / f"checkpoint-{step}", base)
    (folder / f"checkpoint-{step}" / "trainer_state.json").write_text(json.dumps({"global_step": step}))


def _run(store, settings, job_id, phase="completed", model="org/base", steps=(), final=True, folder=None):
    """A run in the history with a folder: final adapter weights (``final``), checkpoints at
    ``steps`` and the loss 1/step logged at every step."""
    folder = folder or settings.runs_dir / job_id
    folder.mkdir(parents=True, exist_ok=True)
    store.create_run(job_id, {"model_name": model}, str(folder), "loading_model")
    for step in range(1, max(steps, default=0) + 1):
        store.add_metric(TrainingProgress(job_id=job_id, step=step, total_steps=max(steps), loss=1.0 / step))
    for step in steps:
        _checkpoint(folder, step, model)
    if final:
        _adapter(folder, model)
    if phase != "loading_model":
        store.finish_run(job_id, phase, None, None)
    time.sleep(0.01)  # distinct creation times: the history lists newest first
    return folder


def test_base_then_each_run_final_and_checkpoints_newest_first(store, settings):
    _run(store, settings, "old", steps=(1, 2))
    full = _run(store, settings, "full", model="org/other", final=False)
    (full / "config.json").write_text("{}")
    (full / "model.safetensors").write_bytes(b"w")
    choices = list_choices(store, settings)
    assert [c.id for c in choices] == ["base", "full", "old", "old/checkpoint-2", "old/checkpoint-1"]
    base, full_choice, final, newest, oldest = choices
    assert base.kind == "base" and base.base_model == "org/other" and base.path is None  # the newest run's base
    assert (full_choice.adapter, full_choice.kind, full_choice.base_model) == (False, "final", "org/other")
    assert (final.adapter, final.step, final.loss, final.path) == (True, 2, 0.5, str(settings.runs_dir / "old"))
    assert (newest.kind, newest.step, newest.loss, newest.job_id) == ("checkpoint", 2, 0.5, "old")
    assert (oldest.step, oldest.loss) == (1, 1.0)
    assert "checkpoint-2" in newest.label and "loss 0.500" in newest.label
    assert [resolve_choice(c.id, store, settings) for c in choices] == choices


def test_without_runs_only_the_default_model(store, settings):
    assert [(c.id, c.base_model) for c in list_choices(store, settings)] == [("base", DEFAULT_MODEL)]
    assert list_choices(None, settings)[0].base_model == DEFAULT_MODEL


def test_runs_without_usable_weights_are_not_listed(store, settings, tmp_path):
    _run(store, settings, "cancelled", phase="stopped", final=False)  # cancelled before any save
    _run(store, settings, "live", phase="training", steps=(1,))
    deleted = _run(store, settings, "deleted")
    shutil.rmtree(deleted)
    _run(store, settings, "outside", folder=tmp_path / "elsewhere")
    failed = _run(store, settings, "failed", phase="error", steps=(1,))  # diverged: checkpoints only
    half = failed / "checkpoint-2"
    _adapter(half)  # no trainer state: not a complete checkpoint
    assert [c.id for c in list_choices(store, settings)] == ["base", "failed/checkpoint-1"]


def test_resolve_names_what_is_wrong(store, settings, tmp_path):
    _run(store, settings, "cancelled", phase="stopped", final=False)
    _run(store, settings, "live", phase="training")
    shutil.rmtree(_run(store, settings, "deleted"))
    _run(store, settings, "outside", folder=tmp_path / "elsewhere")
    _run(store, settings, "failed", phase="error", steps=(1,), final=False)
    mixed = _run(store, settings, "mixed", steps=(1,))
    _checkpoint(mixed, 2, base="org/another")
    for model_id in ("nope", "", "nope/checkpoint-1", "mixed/final", "mixed/checkpoint-x"):
        with pytest.raises(UnknownModel):
            resolve_choice(model_id, store, settings)
    cases = {
        "cancelled": "run cancelled (stopped) has no weights to talk to: it ended before its first save",
        "live": "run live is still training",
        "deleted": "its folder",
        "outside": "outside the allowed folders",
        "failed": "saved no final weights; choose one of its checkpoints (newest: failed/checkpoint-1)",
        "mixed/checkpoint-2": "its adapter was trained on org/another, not on the run's base model org/base",
        "mixed/checkpoint-7": "run mixed has no complete checkpoint-7",
    }
    for model_id, message in cases.items():
        with pytest.raises(ChatInputError, match=re.escape(message)) as caught:
            resolve_choice(model_id, store, settings)
        assert not isinstance(caught.value, UnknownModel), model_id
    assert resolve_choice("failed/checkpoint-1", store, settings).step == 1
    assert "mixed/checkpoint-2" not in [c.id for c in list_choices(store, settings)]


def test_a_base_model_folder_outside_the_model_folders_is_refused(store, settings, tmp_path):
    inside = settings.models_dir / "my-base"
    _run(store, settings, "ok", model=str(inside))
    _run(store, settings, "outside", model=str(tmp_path / "elsewhere" / "my-base"))
    assert [c.id for c in list_choices(store, settings)] == ["base", "ok"]
    assert list_choices(store, settings)[0].base_model == str(inside)
    with pytest.raises(ChatInputError, match="outside: base model: .* is outside the allowed folders"):
        resolve_choice("outside", store, settings)


def test_model_key_matches_hub_ids_cache_snapshots_and_the_materialized_default(tmp_path):
    snapshot = tmp_path / "hub" / "models--Org--Name" / "snapshots" / "abc123"
    assert model_key(str(snapshot)) == model_key("Org/Name") == "org/name"
    materialized = tmp_path / "models" / DEFAULT_MODEL.split("/")[-1]
    assert model_key(str(materialized), tmp_path / "models") == model_key(DEFAULT_MODEL)
    assert model_key(str(tmp_path / "a")) != model_key(str(tmp_path / "b"))


def test_an_embedding_run_and_its_base_serve_embeddings(store, settings):
    _run(store, settings, "chat")
    assert [c.serves for c in list_choices(store, settings)] == ["chat", "chat"]
    folder = _run(store, settings, "emb")
    (folder / "modules.json").write_text("[]")  # what save_embedder writes beside an embedder's adapter
    choices = list_choices(store, settings)
    assert [(c.id, c.serves) for c in choices] == [("base", "embeddings"), ("emb", "embeddings"), ("chat", "chat")]
    assert resolve_choice("emb", store, settings).serves == "embeddings"


def test_base_serves_what_its_own_folder_serves(store, settings):
    lm, encoder = settings.models_dir / "lm", settings.models_dir / "encoder"
    for folder in (lm, encoder):
        folder.mkdir(parents=True)
        (folder / "config.json").write_text("{}")
    (encoder / "modules.json").write_text("[]")
    (_run(store, settings, "emb", model=str(lm)) / "modules.json").write_text("[]")  # a causal LM trained to embed
    assert [(c.id, c.serves) for c in list_choices(store, settings)] == [("base", "chat"), ("emb", "embeddings")]
    _run(store, settings, "chat", model=str(encoder))  # newer: its base folder is a sentence-transformers model
    assert list_choices(store, settings)[0].serves == "embeddings"
