"""Cheap model / Hub dataset checks made at Start (no network here: the Hub is unreachable)."""

import time

import pytest

from trainer_core.models.hub import HubCheckError, check_hub_dataset, check_model, looks_like_path
from trainer_core.paths import PathNotAllowed
from trainer_core.request.model import DEFAULT_MODEL
from trainer_core.schemas import TrainingStartRequest


def test_paths_and_hub_ids_are_told_apart():
    assert looks_like_path("/m") and looks_like_path("./m") and looks_like_path("~/m") and looks_like_path("a/b/c")
    assert not looks_like_path("gpt2") and not looks_like_path("owner/name")


def test_a_model_folder_must_lie_in_the_roots_and_have_a_config(tmp_path):
    root, outside = tmp_path / "root", tmp_path / "outside"
    (root / "m").mkdir(parents=True)
    (outside / "m").mkdir(parents=True)
    (outside / "m" / "config.json").write_text("{}")
    messages = []
    for folder in (outside / "m", outside / "missing"):
        with pytest.raises(PathNotAllowed) as info:
            check_model(str(folder), [root])
        messages.append(str(info.value).replace(str(folder), "P"))
    assert messages[0] == messages[1]  # nothing tells an existing folder from a missing one
    with pytest.raises(HubCheckError, match="no config.json"):
        check_model(str(root / "m"), [root])
    (root / "m" / "config.json").write_text("{}")
    assert check_model(str(root / "m"), [root]) == str((root / "m").resolve())


def test_hub_ids_offline(monkeypatch):
    assert check_model(DEFAULT_MODEL, []) == DEFAULT_MODEL  # the bundled copy stands in
    t0 = time.monotonic()
    with pytest.raises(HubCheckError, match="model_name: someone/absent is not in the local cache"):
        check_model("someone/absent", [])
    with pytest.raises(HubCheckError, match="hf_dataset: someone/absent-data is not in the local cache"):
        check_hub_dataset("someone/absent-data")
    assert time.monotonic() - t0 < 10
    with pytest.raises(HubCheckError, match="not a Hub id"):
        check_model("bad id!", [])


def test_hf_dataset_never_names_a_local_folder(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "data").mkdir()
    with pytest.raises(HubCheckError, match="names a local file or folder"):
        check_hub_dataset("data")
    for value in ("/some/folder", "../up", "a/b/c", "./data"):
        with pytest.raises(ValueError, match="hf_dataset"):
            TrainingStartRequest(hf_dataset=value)


def test_an_adapter_folder_whose_base_lies_outside_the_roots_is_refused(tmp_path):
    import json

    from trainer_core.models.hub import check_model_name

    root, elsewhere = tmp_path / "models", tmp_path / "elsewhere"
    (root / "run").mkdir(parents=True)
    (root / "base").mkdir()
    (root / "run" / "config.json").write_text("{}")

    def adapter(base):
        (root / "run" / "adapter_config.json").write_text(json.dumps({"base_model_name_or_path": base}))
        return check_model_name(str(root / "run"), [root])

    for outside in (str(elsewhere), "/etc", f"{root}/../elsewhere"):
        with pytest.raises(PathNotAllowed) as refused:
            adapter(outside)
        assert refused.value.fields == ("model_name",) and "base_model_name_or_path" in str(refused.value)
    assert adapter(str(root / "base")) == str((root / "run").resolve())  # a base in the roots
    assert adapter("HuggingFaceTB/SmolLM2-135M") == str((root / "run").resolve())  # a Hub id: the Hub's rules
    (root / "run" / "adapter_config.json").write_text("[not json")  # unreadable: the loader says so
    assert check_model_name(str(root / "run"), [root]) == str((root / "run").resolve())
