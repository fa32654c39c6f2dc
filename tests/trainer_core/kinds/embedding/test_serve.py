"""The embedding model in the inference worker (``kinds.embedding.serve``, run in-process here): a
LoRA run's vectors equal ``load_embedder(folder).encode`` (unit length), its base's with the adapter
disabled, ``dimensions`` cut and re-normalised, tokens counted, refusals naming the field; a causal
LM as the base of an embedding run embeds with the last-token head."""

from __future__ import annotations

import numpy as np
import pytest

from tests.support.embedding_runs import TEXTS, lora_embedding_run
from trainer_core.kinds.embedding.kind import EMBEDDING
from trainer_core.kinds.embedding.loading import load_embedder
from trainer_core.kinds.embedding.serve import unit_rows
from trainer_core.model_kind import serving_kind
from trainer_core.models.loading import ModelLoadError
from trainer_core.serving.errors import ChatInputError
from trainer_core.serving.schemas import ModelChoice


def _unit(vectors):
    return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


@pytest.fixture(scope="module")
def run_folder(tiny_encoder_dir, tmp_path_factory):
    return lora_embedding_run(tiny_encoder_dir, tmp_path_factory.mktemp("emb") / "run")


def _choice(folder, base, **extra):
    fields = dict(id="job_e", label="e", kind="final", base_model=str(base), path=str(folder), adapter=True)
    return ModelChoice(**{**fields, "serves": "embeddings", **extra})


def test_a_lora_run_answers_its_own_vectors_and_its_base_with_the_adapter_off(run_folder, tiny_encoder_dir, tmp_path):
    assert serving_kind("embeddings") is EMBEDDING and serving_kind("chat").load_server(None, tmp_path) is None
    server = EMBEDDING.load_server(_choice(run_folder, tiny_encoder_dir), tmp_path)
    tuned = server.answer({"input": TEXTS, "dimensions": None, "use_adapter": True})
    expected = _unit(load_embedder(run_folder).encode(TEXTS))
    assert tuned["vectors"].dtype == np.float32 and tuned["vectors"].shape == (4, 64)
    assert np.abs(tuned["vectors"] - expected).max() < 1e-5
    tokenizer = load_embedder(tiny_encoder_dir).tokenizer
    assert tuned["prompt_tokens"] == sum(len(tokenizer(t)["input_ids"]) for t in TEXTS)
    base = server.answer({"input": TEXTS, "use_adapter": False})["vectors"]
    assert np.abs(base - _unit(load_embedder(tiny_encoder_dir).encode(TEXTS))).max() < 1e-5
    assert np.abs(base - tuned["vectors"]).max() > 1e-3  # the adapter is on again afterwards
    again = server.answer({"input": TEXTS[:1]})["vectors"]
    assert np.abs(again - tuned["vectors"][:1]).max() < 1e-5


def test_dimensions_keep_the_first_values_renormalised_and_are_bounded_by_the_model(
    run_folder, tiny_encoder_dir, tmp_path
):
    server = EMBEDDING.load_server(_choice(run_folder, tiny_encoder_dir), tmp_path)
    full = server.answer({"input": TEXTS})["vectors"]
    cut = server.answer({"input": TEXTS, "dimensions": 16})["vectors"]
    assert cut.shape == (4, 16) and np.allclose(np.linalg.norm(cut, axis=1), 1.0, atol=1e-6)
    assert np.allclose(cut, _unit(full[:, :16]), atol=1e-6)
    with pytest.raises(ChatInputError, match="dimensions: job_e makes vectors of 64 values") as refused:
        server.answer({"input": TEXTS, "dimensions": 65})
    assert refused.value.fields == ("dimensions",) and refused.value.code == "dimensions_too_large"
    with pytest.raises(ChatInputError, match="an embedding model") as chat:
        server.answer({"messages": [{"role": "user", "content": "hi"}], "settings": {}})
    assert chat.value.code == "embedding_model"
    assert np.allclose(unit_rows(np.array([[3.0, 4.0], [0.0, 0.0]])), [[0.6, 0.8], [0.0, 0.0]])


def test_the_causal_base_of_an_embedding_run_embeds_with_the_last_token_head(tiny_model_dir, tmp_path):
    base = ModelChoice(id="base", label="b", kind="base", base_model=str(tiny_model_dir), serves="embeddings")
    server = EMBEDDING.load_server(base, tmp_path)
    vectors = server.answer({"input": TEXTS, "use_adapter": False})["vectors"]
    assert np.abs(vectors - load_embedder(tiny_model_dir).encode(TEXTS)).max() < 1e-4
    with pytest.raises(ModelLoadError, match="could not load the embedding model job_x"):
        EMBEDDING.load_server(_choice(tmp_path, tmp_path, id="job_x", adapter=False), tmp_path)


def test_a_model_whose_vectors_are_not_finite_is_refused_naming_the_model(tiny_encoder_dir, tmp_path):
    import torch

    from trainer_core.kinds.embedding.loading import save_embedder

    model = load_embedder(tiny_encoder_dir)
    with torch.no_grad():
        next(model[0].model.parameters()).fill_(float("nan"))  # a run that diverged, saved whole
    save_embedder(model, tmp_path / "broken")
    server = EMBEDDING.load_server(_choice(tmp_path / "broken", tiny_encoder_dir, adapter=False), tmp_path)
    with pytest.raises(ChatInputError, match="job_e makes vectors with NaN or infinite values") as refused:
        server.answer({"input": TEXTS})
    assert refused.value.fields == ("model",) and refused.value.code == "vectors_not_finite"
