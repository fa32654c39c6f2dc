"""Data recipes against the studio's own /v1 serving the tiny model (a real inference worker; its
outputs are noise, so the gates drop most of them, which is what the counts must show): the CLI's
preview and full run, the data folder with the dataset and its card, Stop keeping what was made,
a wrong key refused, and the key nowhere in output, logs or files."""

from __future__ import annotations

import json
import logging
import threading

import pytest
import yaml
from pydantic import SecretStr

from tests.e2e.conftest import TOKEN
from tests.support.cli_here import cli_main
from tests.support.documents import alpaca_paragraphs, write_pdf
from tests.support.recipe_server import studio_v1, topics_recipe
from trainer_core.recipes.errors import MODEL_UNREACHABLE
from trainer_core.recipes.journal import read_made
from trainer_core.recipes.library import template_text
from trainer_core.recipes.output import DATA_FILE, result_folder, write_result
from trainer_core.recipes.run import run_recipe
from trainer_core.recipes.schema import parse_recipe
from trainer_core.recipes.task_worker import make_into
from trainer_core.settings import Settings

pytestmark = pytest.mark.slow
KEY_VARIABLE = "RECIPE_TEST_KEY"


@pytest.fixture(scope="module")
def served(tmp_path_factory, tiny_model_dir, datasets_dir):
    """(settings, /v1 URL, model id, the documents folder): a 3-page PDF in the data dir."""
    settings = Settings(
        data_dir=tmp_path_factory.mktemp("recipes"), api_token=TOKEN, allowed_paths=str(tiny_model_dir.parent)
    )
    docs = settings.data_dir / "docs"
    docs.mkdir()
    write_pdf(docs / "manual.pdf", alpaca_paragraphs(datasets_dir, 60), pages=3)
    with studio_v1(settings, tiny_model_dir) as (url, model):
        yield settings, url, model, docs


def _recipe(served, template: str, tiny_model_dir, **changes) -> dict:
    settings, url, model, docs = served
    data = yaml.safe_load(template_text(template))
    data["documents"] = [str(docs)]
    data["chunking"] = {"chunk_tokens": 128, "overlap_tokens": 16, "tokenizer": str(tiny_model_dir)}
    data["model"].update(endpoint=url, model=model, api_key_env=KEY_VARIABLE)
    data["model"]["inference_parameters"]["max_tokens"] = 24
    data.update(changes)
    return data


def _cli(served, data: dict, tmp_path, *extra: str, key: str = TOKEN) -> int:
    settings = served[0]
    (tmp_path / "recipe.yaml").write_text(yaml.safe_dump(data), encoding="utf-8")
    return cli_main(
        ["recipe", "run", str(tmp_path / "recipe.yaml"), *extra],
        STUDIO_DATA_DIR=str(settings.data_dir),
        STUDIO_ALLOWED_PATHS=settings.allowed_paths,
        RECIPE_TEST_KEY=key,
    )


def _no_key_anywhere(settings, *texts: str) -> None:
    for text in texts:
        assert TOKEN not in text
    for path in (settings.data_dir / "recipes").rglob("*"):
        if path.is_file():
            assert TOKEN.encode() not in path.read_bytes(), path


def test_cli_runs_a_recipe_into_the_data_folder(served, tiny_model_dir, tmp_path, capsys, caplog):
    caplog.set_level(logging.DEBUG)
    settings = served[0]
    data = _recipe(served, "embedding_pairs", tiny_model_dir, num_records=3)
    assert _cli(served, data, tmp_path) == 0
    out, err = capsys.readouterr()
    report = json.loads(out.strip().splitlines()[-1])
    assert report["records"] == report["made"] == 3
    assert report["kept"] + sum(report["dropped"].values()) == 3 and report["requests"] == 3
    assert report["completion_tokens"] > 0 and report["model"]["model"] == served[2]
    folder = settings.data_dir / "recipes" / report["folder"].rsplit("/", 1)[-1]
    rows = [json.loads(line) for line in (folder / DATA_FILE).read_text().splitlines()]
    assert len(rows) == report["kept"] and all(set(r) == {"anchor", "positive"} for r in rows)
    chunks = [json.loads(line)["chunk"] for line in (folder / "rows.jsonl").read_text().splitlines()]
    assert [r["positive"] for r in rows] == chunks
    card = (folder / "README.md").read_text()
    assert "`manual.pdf`" in card and f"kept: **{report['kept']}**" in card and str(folder / DATA_FILE) in card
    assert "[    3/3] records made" in err
    _no_key_anywhere(settings, out, err, caplog.text)


def test_preview_prints_records_and_writes_nothing(served, tiny_model_dir, tmp_path, capsys, caplog):
    caplog.set_level(logging.DEBUG)
    settings = served[0]
    before = set((settings.data_dir / "recipes").glob("*")) if (settings.data_dir / "recipes").exists() else set()
    assert _cli(served, _recipe(served, "qa_from_documents", tiny_model_dir), tmp_path, "--preview", "2") == 0
    out, err = capsys.readouterr()
    lines = [json.loads(line) for line in out.strip().splitlines()]
    assert sorted(line["record"] for line in lines[:-1]) == [0, 1]
    preview, estimate = lines[-1]["preview"], lines[-1]["full_run_estimate"]
    assert preview["made"] == 2 and preview["kept"] + sum(preview["dropped"].values()) == 2
    chunks = preview["sources"][0]["chunks"]
    assert estimate["records"] == chunks > 2 and estimate["seconds"] >= 0
    tokens = preview["prompt_tokens"] + preview["completion_tokens"]
    assert estimate["tokens"] == round(tokens * chunks / 2)
    # noise from the tiny model: structured values are JSON by constrained decoding, cut at 24 tokens
    # or not grounded in the chunk, so the gates drop them and say which
    assert all(line["dropped"] in ("schema", "grounding", "judge") for line in lines[:-1] if "dropped" in line)
    after = set((settings.data_dir / "recipes").glob("*")) if (settings.data_dir / "recipes").exists() else set()
    assert after == before
    _no_key_anywhere(settings, out, err, caplog.text)


def test_a_wrong_key_is_refused_without_being_shown(served, tiny_model_dir, tmp_path, capsys):
    data = _recipe(served, "embedding_pairs", tiny_model_dir, num_records=1)
    assert _cli(served, data, tmp_path, key="wrong-key-abcdefghijkl") == 1
    out, err = capsys.readouterr()
    assert f"error [{MODEL_UNREACHABLE}]: model: {served[1]} (model {served[2]}) answered 401" in err
    assert "wrong-key-abcdefghijkl" not in out + err


def test_stop_keeps_what_was_made(served, tiny_model_dir, caplog):
    caplog.set_level(logging.DEBUG)
    settings = served[0]
    recipe = parse_recipe(_recipe(served, "embedding_pairs", tiny_model_dir, num_records=6))
    stop = threading.Event()
    result = run_recipe(recipe, settings, SecretStr(TOKEN), progress=lambda done, total, dropped: stop.set(), stop=stop)
    assert result.stopped and 1 <= result.counts["made"] < 6 and result.records == 6
    folder = write_result(recipe, result, settings)
    assert len((folder / DATA_FILE).read_text().splitlines()) == result.counts["kept"]
    assert f"(stopped at {result.counts['made']} of 6)" in (folder / "README.md").read_text()
    _no_key_anywhere(settings, caplog.text)


def test_cli_resume_finishes_a_stopped_run_in_its_folder(served, tmp_path, capsys, caplog):
    caplog.set_level(logging.DEBUG)
    settings, url, model, _ = served
    data = topics_recipe(url, model, ["cats", "ox", "dogs", "birds"])
    data["model"]["api_key_env"] = KEY_VARIABLE
    recipe = parse_recipe(data)
    folder, stop = result_folder(recipe, settings), threading.Event()
    first = make_into(recipe, SecretStr(TOKEN), settings, folder, stop, lambda done, total, dropped: stop.set())
    assert first["stopped"] and 1 <= first["made"] < 4
    assert _cli(served, data, tmp_path, "--resume", folder.name) == 0
    out, err = capsys.readouterr()
    report = json.loads(out.strip().splitlines()[-1])
    assert report["folder"] == str(folder) and report["made"] == report["records"] == 4
    assert report["dropped"]["length"] == 1 and not report["stopped"]
    assert report["requests"] == 4  # one request per record over both parts: none asked twice
    assert [r.index for r in read_made(folder)] == [0, 1, 2, 3]
    _no_key_anywhere(settings, out, err, caplog.text)
