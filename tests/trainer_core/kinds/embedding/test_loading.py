"""Embedding models loaded, saved and reloaded one way (``kinds.embedding.loading``): a
sentence-transformers folder as it is, a causal LM with the last-token head, and a LoRA run's
folder (module files and PEFT's adapter, no base weights) giving back the same vectors; and the
registry's detection (the folder's ``modules.json``, the request's ``is_embedding``)."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from trainer_core.kinds.embedding.kind import EMBEDDING
from trainer_core.kinds.embedding.loading import EmbedderLoadError, adapter_base, load_embedder, save_embedder
from trainer_core.model_kind import kind_for_folder, kind_for_request

TEXTS = ["How do I reset my password?", "The cat sat on the mat.", "Einstein was born in 1879."]


def _with_lora(model):
    from peft import LoraConfig, TaskType, get_peft_model

    body = model[0]
    config = LoraConfig(
        task_type=TaskType.FEATURE_EXTRACTION, r=4, target_modules="all-linear", init_lora_weights=False
    )
    body.model = get_peft_model(body.model, config)
    return model


@pytest.mark.parametrize("which", ["tiny_encoder_dir", "tiny_model_dir"])
def test_a_lora_run_folder_holds_the_adapter_alone_and_reloads_to_the_same_vectors(which, request, tmp_path):
    base = request.getfixturevalue(which)
    model = _with_lora(load_embedder(base))
    before = model.encode(TEXTS)
    assert np.allclose((before**2).sum(axis=1), 1.0, atol=1e-5)  # normalized
    save_embedder(model, tmp_path / "run")
    files = {p.name for p in (tmp_path / "run").iterdir()}
    assert {"modules.json", "adapter_config.json", "adapter_model.safetensors"} <= files
    assert not any(name.startswith("model") and name.endswith(".safetensors") for name in files)  # no base weights
    assert adapter_base(tmp_path / "run") == base
    again = load_embedder(tmp_path / "run").encode(TEXTS)
    assert np.abs(again - before).max() < 1e-5
    untouched = load_embedder(base).encode(TEXTS)
    assert np.abs(untouched - before).max() > 1e-3  # the adapter changed the vectors


def test_a_causal_lm_gets_last_token_pooling_with_left_padding_over_the_plain_text(tiny_model_dir, tmp_path):
    model = load_embedder(tiny_model_dir)
    assert model[1].pooling_mode == "lasttoken" and model[0].tokenizer.padding_side == "left"
    one = model.encode(TEXTS[:1])
    padded = model.encode(TEXTS)[:1]  # the same text beside longer ones: left padding keeps its last token
    assert np.abs(one - padded).max() < 1e-4
    features = model.preprocess(TEXTS[:1])
    assert model[0].tokenizer.decode(features["input_ids"][0]) == TEXTS[0]  # the text itself, no chat template
    saved = tmp_path / "embedder"
    model.save(str(saved))
    assert load_embedder(saved).preprocess(TEXTS[:1])["input_ids"].tolist() == features["input_ids"].tolist()


def test_the_folder_or_the_request_makes_a_model_an_embedder(tiny_encoder_dir, tiny_model_dir, tmp_path):
    assert kind_for_folder(tiny_encoder_dir) is EMBEDDING  # modules.json
    assert kind_for_folder(tiny_model_dir) is not EMBEDDING
    assert kind_for_request(SimpleNamespace(is_embedding=True), tiny_model_dir) is EMBEDDING
    assert kind_for_request(SimpleNamespace(is_embedding=None), tiny_model_dir).name == "causal"
    with pytest.raises(EmbedderLoadError, match="no model here"):
        load_embedder(tmp_path)
    (tmp_path / "adapter_config.json").write_text("[]")
    with pytest.raises(EmbedderLoadError, match="adapter_config.json: not a PEFT adapter config"):
        load_embedder(tmp_path)


def test_a_run_folder_moved_with_its_base_loads_from_the_base_given(tiny_encoder_dir, tmp_path):
    model = _with_lora(load_embedder(tiny_encoder_dir))
    save_embedder(model, tmp_path / "run")
    assert (
        np.abs(load_embedder(tmp_path / "run", base=Path(tiny_encoder_dir)).encode(TEXTS) - model.encode(TEXTS)).max()
        < 1e-5
    )


def _module_list(folder: Path, modules) -> None:
    import json

    (folder / "modules.json").write_text(modules if isinstance(modules, str) else json.dumps(modules))


@pytest.mark.parametrize(
    "attack,words",
    [
        ("link", "module 1 (Pooling) is read from '1_Pooling', outside the model's folder"),
        ("link_inside", "module 1 (Pooling) is read from '1_Pooling', outside"),
        ("dotdot", "module 1 (Pooling) is read from '../outside'"),
        ("rooted", "module 1 (Pooling) is read from '/"),
        ("not_a_list", "not a sentence-transformers module list"),
        ("empty", "not a sentence-transformers module list"),
        ("garbage", "cannot be read as a module list"),
        ("no_path", 'module 1 needs a "path" and a "type"'),
    ],
)
def test_a_module_read_from_outside_the_folder_is_refused_before_anything_loads(
    attack, words, tiny_encoder_dir, tmp_path
):
    import json
    import os
    import shutil

    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "config.json").write_text('{"pooling_mode": "cls", "word_embedding_dimension": 64}')
    folder = tmp_path / "model"
    shutil.copytree(tiny_encoder_dir, folder)
    modules = json.loads((folder / "modules.json").read_text())
    pooling = folder / modules[1]["path"]
    if attack == "link":  # the module folder a link out of the model folder
        shutil.rmtree(pooling)
        os.symlink(outside, pooling)
    elif attack == "link_inside":  # a real folder, its config a link out
        (pooling / "config.json").unlink()
        os.symlink(outside / "config.json", pooling / "config.json")
    elif attack in ("dotdot", "rooted"):
        modules[1]["path"] = "../outside" if attack == "dotdot" else str(outside)
        _module_list(folder, modules)
    elif attack == "no_path":
        modules[1]["path"] = 5
        _module_list(folder, modules)
    else:
        _module_list(folder, {"not_a_list": "{}", "empty": "[]", "garbage": "nope"}[attack])
    with pytest.raises(EmbedderLoadError) as refused:
        load_embedder(folder)
    assert str(refused.value).startswith(f"{folder / 'modules.json'}: ") and words in str(refused.value)


def test_a_hub_cache_snapshot_whose_files_link_into_its_blobs_still_loads(tiny_encoder_dir, tmp_path):
    import os
    import shutil

    repo = tmp_path / "hub" / "models--org--tiny"
    snapshot = repo / "snapshots" / "0123abc"
    shutil.copytree(tiny_encoder_dir, snapshot)
    (repo / "blobs").mkdir()
    for file in [p for p in snapshot.rglob("*") if p.is_file()]:  # as huggingface_hub lays a download out
        blob = repo / "blobs" / f"{abs(hash(str(file))):x}"
        file.rename(blob)
        os.symlink(os.path.relpath(blob, file.parent), file)
    got = load_embedder(snapshot).encode(["a cat"])
    assert np.allclose(got, load_embedder(tiny_encoder_dir).encode(["a cat"]), atol=1e-6)


def test_an_adapter_peft_cannot_read_is_a_load_error_naming_its_config(tiny_encoder_dir, tmp_path):
    import json

    folder = tmp_path / "run"
    folder.mkdir()
    (folder / "adapter_config.json").write_text(json.dumps({"base_model_name_or_path": str(tiny_encoder_dir)}))
    with pytest.raises(EmbedderLoadError, match="adapter_config.json: the adapter cannot be loaded on .*peft_type"):
        load_embedder(folder)
