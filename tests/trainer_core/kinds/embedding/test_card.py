"""The embedding export's model card (``kinds.embedding.card``): the evaluation figures the run
logged up to the exported step, and what the card says for each format."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

from trainer_core.export.card import RunFacts
from trainer_core.export.schemas import CheckResult
from trainer_core.kinds.embedding.card import DEFAULT_LOSS, LLAMA_CPP_PYTHONPATH, render, run_metrics
from trainer_core.settings import Settings


def test_run_metrics_are_the_last_eval_figures_up_to_the_exported_step(tmp_path):
    rows = [
        {"step": 10, "loss": 0.9, "eval_ndcg_at_10": 0.3, "eval_runtime": 1.5},
        {"step": 20, "eval_ndcg_at_10": 0.5, "eval_flag": True},
        {"step": 30, "eval_ndcg_at_10": 0.7},
    ]
    (tmp_path / "metrics.jsonl").write_text("\n".join(map(json.dumps, rows)) + "\nnot json\n")
    at_20 = SimpleNamespace(path=str(tmp_path), kind="final", step=20)
    assert run_metrics(at_20) == {"eval_ndcg_at_10": 0.5, "eval_runtime": 1.5}  # booleans are not figures
    assert run_metrics(SimpleNamespace(path=str(tmp_path), kind="final", step=None))["eval_ndcg_at_10"] == 0.7
    assert run_metrics(at_20, {"metrics": [{"step": 5, "eval_recall_at_1": 0.25}]}) == {"eval_recall_at_1": 0.25}


def test_the_card_names_the_loss_the_metrics_the_check_and_how_to_load_each_format():
    facts = RunFacts(name="job_1", base_model="BAAI/bge-small-en-v1.5", hub_base="BAAI/bge-small-en-v1.5", request={})
    check = CheckResult(
        passed=True, summary="f16 in llama.cpp: 4/4 sentences, lowest cosine 0.99990", checked_by="llama.cpp"
    )
    gguf = render(facts, {"eval_ndcg_at_10": 0.61234}, "gguf-f16", ["job_1-f16.gguf"], check, [])
    assert "base_model: BAAI/bge-small-en-v1.5" in gguf and "library_name" not in gguf and "- gguf" in gguf
    assert f"loss: `{DEFAULT_LOSS}`" in gguf and "eval_ndcg_at_10: 0.6123" in gguf
    assert (
        "Passed (llama.cpp): f16 in llama.cpp: 4/4 sentences" in gguf
        and "llama-embedding -m job_1-f16.gguf --embd-normalize 2" in gguf
    )
    merged = render(facts, {}, "merged", ["model.safetensors"], None, ["a note"], "float16")
    assert "# job_1: merged embedding model (float16)" in merged and "## Results" not in merged
    assert 'SentenceTransformer("PATH_TO_THIS_FOLDER")' in merged and "- a note" in merged


def test_the_gguf_card_gives_commands_that_work_after_setup_sh_with_unit_vectors():
    """setup.sh builds llama-cpp-python into a folder of its own (no ``llama_cpp`` on the path, no
    llama.cpp programs): the card says that folder, normalize=True, and how to get the programs."""
    assert Path(LLAMA_CPP_PYTHONPATH).expanduser() == Settings.model_fields["llama_cpp_dir"].default
    setup = (Path(__file__).parents[4] / "scripts" / "setup.sh").read_text()
    assert 'LLAMA_CPP_DIR="${STUDIO_LLAMA_CPP_DIR:-$HOME/.cache/finetune_studio/tools/llama-cpp-python}"' in setup
    assert "-DLLAMA_BUILD_TOOLS=OFF" in setup  # so llama-embedding / llama-server are the user's to build
    facts = RunFacts(name="job_1", base_model="b", hub_base=None, request={})
    card = render(facts, {}, "gguf-q8_0", ["job_1-q8_0.gguf"], None, [])
    assert f"PYTHONPATH={LLAMA_CPP_PYTHONPATH} python3" in card and "pip install llama-cpp-python" in card
    assert 'model = Llama("job_1-q8_0.gguf", embedding=True, verbose=False)' in card
    assert 'model.embed("what is a cat?", normalize=True)' in card
    assert "not built by Finetune Studio's setup" in card and "--target llama-embedding llama-server" in card
    readme = (Path(__file__).parents[4] / "README.md").read_text()
    embedding = readme[readme.index("Embedding models") :]
    assert f"PYTHONPATH={LLAMA_CPP_PYTHONPATH} python3" in embedding and "normalize=True" in embedding
    assert "llama-embedding -m FILE.gguf --embd-normalize 2" in embedding
