"""The one reader of a mapping field's text (``trainer_core.request.mappings``): its three forms at
every door that takes text (the form's box, the request as the API and a YAML file give it, the
CLI's pairs), and every mapping the studio suggests read back by it."""

from __future__ import annotations

import re

import datasets
import pytest

from trainer_core.data.errors import DatasetError
from trainer_core.data.formats import apply_mapping, detect_format
from trainer_core.data.prompts import prompt_layout
from trainer_core.fieldmeta import FIELDS
from trainer_core.kinds.embedding.data import embedding_rows
from trainer_core.refusals import Refusal
from trainer_core.request.mappings import mapping_text, parse_mapping
from trainer_core.schemas import TrainingStartRequest
from trainer_core.vocabulary import FormatType

QA = {"instruction": "question", "output": "answer"}
FORMS = [
    "instruction=question, output=answer",  # the README's
    "instruction -> question, output -> answer",  # the field's old help
    '{"instruction": "question", "output": "answer"}',  # the old preview's suggestion
    "instruction = question\noutput = answer",
]


@pytest.mark.parametrize("text", FORMS)
def test_each_form_reads_the_same_mapping_at_every_door(text):
    assert parse_mapping(text) == QA
    assert TrainingStartRequest(local_datasets=["/x.json"], custom_format_mapping=text).custom_format_mapping == QA


def test_json_keeps_numbers_and_text_pairs_become_the_fields_type():
    assert parse_mapping('{"CPU": 2}', "resources_per_worker") == {"CPU": 2}
    request = TrainingStartRequest(local_datasets=["/x.json"], resources_per_worker="CPU=2, GPU=0.5")
    assert request.resources_per_worker == {"CPU": 2.0, "GPU": 0.5}
    assert mapping_text(request.resources_per_worker) == "CPU=2, GPU=0.5"
    assert parse_mapping("") == {} and parse_mapping("  ") == {}


@pytest.mark.parametrize(
    "text, needle",
    [
        ("instruction question", "'instruction question' is not 'our_column=file_column'"),
        ("instruction=", "'instruction=' is not"),
        ('{"instruction": ', "not a JSON object"),
        ('{"": "answer"}', "the JSON must be an object of names"),
    ],
)
def test_unreadable_text_is_refused_naming_the_field_and_the_forms(text, needle):
    with pytest.raises(Refusal) as refused:
        parse_mapping(text)
    assert needle in str(refused.value) and refused.value.fields == ("custom_format_mapping",)
    assert "->" in str(refused.value) and "JSON" in str(refused.value)


def suggested(text: str) -> list[str]:
    """Every mapping suggested in ``text``: what follows "e.g. " up to a ")", " (", ";" or the end."""
    return [m.strip().rstrip(".") for m in re.findall(r"e\.g\. (.+?)(?=\)| \(|;|$)", text)]


def refusal(call) -> str:
    with pytest.raises(DatasetError) as refused:
        call()
    return str(refused.value)


def rows(columns: list[str]) -> datasets.Dataset:
    return datasets.Dataset.from_dict({c: [f"{c} text"] for c in columns})


def test_every_column_mapping_the_studio_suggests_reads_back_and_maps_the_file():
    """The help, the preview's and the check's refusals suggest only mappings the
    field accepts, and each one makes the file it was suggested for readable."""
    from ui.form import MAPPING_HINTS

    cases = [  # (text that suggests, the columns it was suggested for)
        (FIELDS["custom_format_mapping"].description, ["question", "answer"]),
        (MAPPING_HINTS["custom_format_mapping"], ["question", "answer"]),
        (refusal(lambda: detect_format(["question", "answer"], "qa.csv")), ["question", "answer"]),
        (refusal(lambda: detect_format(["prompt", "answer"], "grpo.json")), ["prompt", "answer"]),
    ]
    found = 0
    for text, columns in cases:
        for suggestion in suggested(text) or [text]:
            mapping = parse_mapping(suggestion)
            assert detect_format(apply_mapping(rows(columns), mapping, "f").column_names, "f") == FormatType.alpaca
            found += 1
    assert found == len(cases)
    grpo = suggested(refusal(lambda: prompt_layout(["problem", "answer"], "math.json")))
    assert prompt_layout(apply_mapping(rows(["problem", "answer"]), parse_mapping(grpo[0]), "f").column_names, "f")


def test_every_embedding_columns_suggestion_reads_back():
    text = refusal(lambda: embedding_rows(rows(["instruction", "output"]), None, "alpaca.json"))
    for hint in suggested(text) + suggested(FIELDS["embedding_columns"].description):
        mapping = parse_mapping(hint, "embedding_columns")
        assert TrainingStartRequest(local_datasets=["/x"], embedding_columns=hint).embedding_columns == mapping
    assert suggested(FIELDS["resources_per_worker"].description)
    for hint in suggested(FIELDS["resources_per_worker"].description):
        assert TrainingStartRequest(local_datasets=["/x"], resources_per_worker=hint).resources_per_worker


def test_prompt_and_answer_under_sft_is_said_to_be_grpo_data():
    """Prompts with answers under sft: the hint names GRPO instead of listing the layouts."""
    text = refusal(lambda: detect_format(["prompt", "answer"], "math.json"))
    assert "looks like GRPO data (prompts with answers" in text and "choose training_method grpo" in text


@pytest.mark.parametrize("text", FORMS)
def test_a_settings_file_may_write_the_mapping_in_each_form(text):
    import json

    from trainer_core.configs.yaml_files import parse_config_text
    from ui.form import widget_value

    values, _ = parse_config_text(f"local_datasets: [/x.json]\ncustom_format_mapping: {json.dumps(text)}\n", "a.yaml")
    assert TrainingStartRequest(**values).custom_format_mapping == QA
    assert widget_value("custom_format_mapping", values["custom_format_mapping"]) == mapping_text(QA)
