"""Settings as files and commands (trainer_core/configs): the YAML and the CLI command give back
exactly the request they were made from."""

from __future__ import annotations

import shlex

import pytest
import yaml

from trainer_core.cli import build_parser, request_from_args
from trainer_core.configs.commands import changed_settings, cli_command
from trainer_core.configs.yaml_files import ConfigFileError, parse_config_text, request_to_yaml
from trainer_core.schemas import TrainingStartRequest

CHANGED = dict(
    learning_rate=5e-4,
    lora_r=8,
    num_epochs=2.5,
    packing=True,
    stop_on_divergence=False,
    target_modules=["q_proj", "v_proj"],
    custom_format_mapping={"instruction": "q", "output": "a b"},
    lr_scheduler_type="linear",
    val_size=0.1,
    output_dir="/tmp/some run",
    model_name="org/model",
)


def _request(tmp_path, **extra) -> TrainingStartRequest:
    data = tmp_path / "my data.json"
    data.write_text('[{"instruction": "hi", "output": "yo"}]')
    return TrainingStartRequest(local_datasets=[str(data)], hf_token="hf_secret", **CHANGED, **extra)


def test_yaml_round_trip_keeps_every_value_and_no_secret(tmp_path):
    request = _request(tmp_path)
    text = request_to_yaml(request.public_dict())
    assert "hf_secret" not in text and "hf_token" not in text
    values, notes = parse_config_text(text)
    assert notes == []
    assert TrainingStartRequest(**values) == request.model_copy(update={"hf_token": None})


def test_cli_command_parses_back_to_the_same_request(tmp_path):
    request = _request(tmp_path)
    command = cli_command(request.public_dict())
    assert "hf_secret" not in command and "--batch-size" not in command
    argv = shlex.split(command.replace("\\\n", " "))[3:]  # after "python -m trainer_core"
    again = request_from_args(build_parser().parse_args(argv))
    assert again == request.model_copy(update={"hf_token": None})


@pytest.mark.parametrize("beta", [0.1, 0.04, 0.2])
def test_a_grpo_form_gives_commands_that_replay_the_same_run(tmp_path, beta):
    """The command preview of a GRPO form: the rewards box's lines (and a JSON list) become
    ``--rewards`` items, a beta is written whenever it is not GRPO's own default (0.04), and the
    command parses back to the request the form makes; an SFT form has no ``--rewards``."""
    import json

    from ui.form import clean_values

    form = {"training_method": "grpo", "beta": beta, "rewards": "numeric_match weight=1.0\nformat weight=0.5\n"}
    settings = {**clean_values(form), "local_datasets": [str(tmp_path / "p.json")]}
    command = cli_command(settings)
    assert ("--beta" in command) == (beta != 0.04) and "'numeric_match weight=1.0'" in command
    argv = shlex.split(command.replace("\\\n", " "))[3:]
    assert request_from_args(build_parser().parse_args(argv)) == TrainingStartRequest(**settings)
    assert TrainingStartRequest(**settings).beta == beta
    listed = {
        **settings,
        "rewards": clean_values({"rewards": json.dumps([{"name": "length", "target_length": 9}])})["rewards"],
    }
    argv = shlex.split(cli_command(listed).replace("\\\n", " "))[3:]
    assert request_from_args(build_parser().parse_args(argv)).rewards[0].target_length == 9
    sft = {**clean_values({"rewards": "", "beta": 0.1}), "local_datasets": ["a.json"]}
    assert "--rewards" not in cli_command(sft) and "rewards" not in changed_settings(sft)


def test_changed_settings_are_only_the_changes(tmp_path):
    changed = changed_settings(_request(tmp_path).public_dict())
    assert set(changed) == set(CHANGED) | {"local_datasets"}


@pytest.mark.parametrize(
    "text, message",
    [
        ("lerning_rate: 1e-3", "did you mean 'learning_rate'"),
        ("batch_size: 0", "batch_size"),
        ("warmup_steps: 3\nwarmup_ratio: 0.1", "either warmup_steps or warmup_ratio"),
        ("[1, 2]", "must be a mapping"),
        ("a: [", "not valid YAML"),
    ],
)
def test_bad_config_names_the_key(text, message):
    with pytest.raises(ConfigFileError, match=message.replace("(", r"\(")):
        parse_config_text(text, "x.yaml")


def test_a_token_in_a_file_is_skipped_with_a_note_and_no_datasets_is_fine():
    values, notes = parse_config_text("hf_token: hf_abc\nlora_r: 4\n")
    assert values == {"lora_r": 4} and "hf_token" in notes[0]
    assert yaml.safe_load(request_to_yaml(values)) == {"lora_r": 4}


def test_the_forms_preview_of_a_local_run_has_no_ray_settings_and_typed_amounts():
    import json

    from trainer_core.configs.commands import curl_command
    from ui.form import FORM_FIELDS, clean_values, form_values

    def preview(**changed) -> dict:
        """The curl body the form's preview writes for a default request with ``changed`` (widget values)."""
        shown = form_values(TrainingStartRequest(local_datasets=["a.json"]).public_dict())[2:]
        settings = clean_values({**dict(zip(FORM_FIELDS, shown)), **changed})  # the mapping box: "CPU=1"
        command = curl_command({**settings, "local_datasets": ["a.json"]}, "http://x", needs_token=False)
        return json.loads(shlex.split(command.replace("\\\n", " "))[-1])

    assert preview() == {"local_datasets": ["a.json"]}  # the case: {"CPU": "1"} was written
    assert preview(num_workers=4, use_gpu=True) == {"local_datasets": ["a.json"]}  # Ray's, for a local run
    ray = preview(compute="ray", ray_address="10.0.0.1:6379", resources_per_worker="CPU=2, GPU=1")
    assert ray["resources_per_worker"] == {"CPU": 2.0, "GPU": 1.0} and ray["compute"] == "ray"
    assert TrainingStartRequest(**ray).resources_per_worker == {"CPU": 2.0, "GPU": 1.0}


def test_a_file_without_data_is_told_apart_by_the_rules_code_and_refusals_carry_their_fields():
    """The loader drops the one problem a file may have, the ``no_training_data`` rule, by its code
    (whatever its words); what remains is refused with its fields, so the page marks them."""
    assert parse_config_text("max_steps: 3\n")[0] == {"max_steps": 3}
    with pytest.raises(ConfigFileError) as refused:
        parse_config_text("warmup_steps: 3\nwarmup_ratio: 0.1\nbatch_size: 0\n", "x.yaml")
    assert refused.value.fields == ("batch_size",) and refused.value.code == "config_file_invalid"
    with pytest.raises(ConfigFileError) as rule:
        parse_config_text("warmup_steps: 3\nwarmup_ratio: 0.1\n", "x.yaml")
    assert rule.value.fields == ("warmup_steps", "warmup_ratio") and str(rule.value).startswith("x.yaml: settings: ")
