"""The form's section titles live once (request.sections): the form, the refusal notice, YAML files
and the CLI's --help read them, and no module types one again."""

import argparse

from tests.support.sources import string_literals
from trainer_core.cli.train import add_parser
from trainer_core.configs.yaml_files import request_to_yaml
from trainer_core.fieldmeta import FIELDS, group
from trainer_core.request.sections import SECTIONS
from trainer_core.schemas import TrainingStartRequest
from ui.refusals import SECTION_TITLES, describe


def test_every_field_is_in_a_section_and_every_section_has_fields():
    assert {group(name) for name in FIELDS} == set(SECTIONS)


def test_no_module_types_a_section_title_again():
    titles = {section.form for section in SECTIONS.values()} | {section.title for section in SECTIONS.values()}
    distinctive = {title for title in titles if " " in title or title == "Hyperparameters"} - {"Training method"}
    assert distinctive == {
        "Model options",
        "Data options",
        "Embedding options",
        "Audio options",
        "Hyperparameters",
        "Devices and processes",
    }
    copies = [(path, text) for path, text in string_literals() for title in distinctive if title in text]
    assert {path for path, _ in copies} == {"trainer_core/request/sections.py"}  # the table alone


def test_yaml_comments_cli_groups_and_refusals_read_the_table():
    request = TrainingStartRequest(local_datasets=["data.json"], num_processes=2)
    comments = [line[6:-4] for line in request_to_yaml(request.public_dict()).splitlines() if line.startswith("# --- ")]
    assert comments == [section.title for section in SECTIONS.values()]
    train = add_parser(argparse.ArgumentParser().add_subparsers())
    groups = [g.title for g in train._action_groups][2:]  # after positionals and options
    assert groups == [section.title for section in SECTIONS.values()]
    assert SECTION_TITLES == {
        key: SECTIONS[key].form for key in ("data", "embedding", "audio", "training", "lora", "output", "distributed")
    }
    assert (
        describe("num_processes: too many", fields=("num_processes",)).text
        == f"Processes (num_processes) ({SECTIONS['distributed'].form}): too many"
    )
