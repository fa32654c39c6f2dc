"""A column mapping written as text at the HTTP door: the three forms the page takes (``a=b``,
``a -> b``, a JSON object) read the same in the API's JSON body; text that is none of them is a 422
naming the field, never a 500."""

from __future__ import annotations

import httpx
import pytest

FORMS = [
    "instruction=question, output=answer",
    "instruction -> question, output -> answer",
    '{"instruction": "question", "output": "answer"}',
]


@pytest.mark.parametrize("text", FORMS)
def test_the_api_reads_each_form_of_a_mapping(app_server, datasets_dir, text):
    _, url = app_server
    body = {"local_datasets": [str(datasets_dir / "no-such-file.csv")], "custom_format_mapping": text}
    answer = httpx.post(url.rstrip("/") + "/api/train/start", json=body, timeout=60)
    assert answer.status_code == 400 and "no-such-file.csv" in answer.text  # past the schema: the file is missing


def test_a_mapping_the_api_cannot_read_is_refused_naming_the_field(app_server, datasets_dir):
    _, url = app_server
    body = {"local_datasets": [str(datasets_dir / "alpaca_en_demo.json")], "custom_format_mapping": "instruction"}
    answer = httpx.post(url.rstrip("/") + "/api/train/start", json=body, timeout=60)
    assert answer.status_code == 422 and "custom_format_mapping" in answer.text and "->" in answer.text
    assert "Traceback" not in answer.text
