"""The recipe panel's own handlers: a template fills the editor, its columns and the numbers it sets
(chunk size, overlap, requests at once); an unknown name is refused; the writer endpoint starts as
this server's own /v1 at the port the page came in on."""

from __future__ import annotations

from types import SimpleNamespace

from trainer_core.recipes.library import template_text
from ui import recipe_panel as panel


def test_a_template_fills_the_editor_columns_and_numbers():
    text, columns, chunk, overlap, concurrency = panel._template("embedding_pairs")
    assert text["value"] == template_text("embedding_pairs")
    assert "`query` (llm-text)" in columns["value"]
    assert (chunk["value"], overlap["value"], concurrency["value"]) == (256, 0, 1)
    text, said, *numbers = panel._template("../../etc/passwd")
    assert text == {"__type__": "update"} and all(n == {"__type__": "update"} for n in numbers)
    assert said["value"].startswith('<div class="queue-note" data-code="not_found">Recipe template: ')


def test_the_endpoint_is_this_servers_own_v1():
    request = SimpleNamespace(request=SimpleNamespace(scope={"server": ("10.1.2.3", 7861)}))
    assert panel.own_endpoint(request) == "http://127.0.0.1:7861/v1"
    assert panel.own_endpoint(SimpleNamespace(request=None)) == ""
