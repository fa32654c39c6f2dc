"""``/api/recipes``: the templates and the check of a recipe's YAML behind the API token, and what
an attacker sends (no token, alias bombs, Python tags, huge or non-mapping bodies, paths outside the
allowed folders) answered as a 4xx with a code, never a 500, never a file read."""

from __future__ import annotations

import pytest
import yaml
from fastapi import FastAPI
from fastapi.testclient import TestClient

from api import errors, recipe_routes
from trainer_core.recipes.library import template_names, template_text
from trainer_core.settings import Settings

TOKEN = "recipe-routes-token-0123456789"


@pytest.fixture(scope="module")
def client(tmp_path_factory) -> TestClient:
    app = FastAPI()
    app.state.settings = Settings(data_dir=tmp_path_factory.mktemp("api"), api_token=TOKEN)
    errors.install(app)
    app.include_router(recipe_routes.router)
    return TestClient(app, headers={"Authorization": f"Bearer {TOKEN}"})


def test_the_token_is_required(client):
    for headers in ({"Authorization": ""}, {"Authorization": "Bearer wrong-token-000000000000"}):
        assert client.get("/api/recipes/templates", headers=headers).status_code == 401
        assert client.post("/api/recipes/check", headers=headers, json={"yaml": "x"}).status_code == 401


def test_templates_are_listed_and_each_checks(client):
    answer = client.get("/api/recipes/templates").json()
    assert [t["name"] for t in answer] == template_names() and all(t["description"] for t in answer)
    for template in answer:
        checked = client.post("/api/recipes/check", json={"yaml": template["yaml"]})
        assert checked.status_code == 200, checked.text
        assert checked.json()["name"] == template["name"] and checked.json()["columns"]
    qa = client.post("/api/recipes/check", json={"yaml": template_text("qa_from_documents")}).json()
    assert qa["source"] == "documents" and qa["output_format"] == "alpaca"
    assert qa["columns"][1] == {"name": "qa", "column_type": "llm-structured"}


@pytest.mark.parametrize(
    "text, code, words",
    [
        ("a: &x [1, 2]\nb: [*x, *x, *x]\n", "recipe_invalid", "aliases (*name) are not taken"),
        ("name: !!python/object/apply:os.system ['id']\n", "recipe_invalid", "cannot be read as YAML"),
        ("- just\n- a list\n", "recipe_invalid", "a recipe is a mapping"),
        ("name: [unclosed\n", "recipe_invalid", "cannot be read as YAML"),
    ],
)
def test_hostile_yaml_is_a_400_with_a_code(client, text, code, words):
    answer = client.post("/api/recipes/check", json={"yaml": text})
    assert answer.status_code == 400 and answer.json()["code"] == code and words in answer.json()["detail"]


def test_bad_values_name_their_keys_and_paths_are_not_read(client):
    data = yaml.safe_load(template_text("qa_from_documents"))
    data["columns"][1]["prompt"] = "{{ secret_env }}"
    answer = client.post("/api/recipes/check", json={"yaml": yaml.safe_dump(data)})
    assert answer.status_code == 400 and "columns.qa: reads secret_env" in answer.json()["detail"]
    data = yaml.safe_load(template_text("qa_from_documents"))
    data["model"]["api_key"] = "sk-inline-secret"
    answer = client.post("/api/recipes/check", json={"yaml": yaml.safe_dump(data)})
    assert answer.status_code in (400, 422) and "sk-inline-secret" not in answer.text
    data = yaml.safe_load(template_text("qa_from_documents"))
    data["documents"] = ["/etc/passwd", "/no/such/file"]  # checked as text: nothing is opened, nothing said
    answer = client.post("/api/recipes/check", json={"yaml": yaml.safe_dump(data)})
    assert answer.status_code == 200 and "passwd" not in answer.text
    assert client.post("/api/recipes/check", json={"yaml": "x" * 300_000}).status_code == 422
    assert (
        client.post("/api/recipes/check", content=b"\xff\xfe", headers={"Content-Type": "application/json"}).status_code
        == 422
    )
