"""``python -m trainer_core chat``: flags built from GenerationSettings' fields, RUN resolved to a
choice (run folder, checkpoint, base) and clear exit-2 refusals, without loading a model."""

import json

import pytest

from trainer_core.cli import build_parser, main
from trainer_core.cli.chat import choice_for, settings_from
from trainer_core.request.model import DEFAULT_MODEL
from trainer_core.serving.schemas import GenerationSettings


def _run_folder(tmp_path, model="org/base"):
    run = tmp_path / "run"
    (run / "checkpoint-2").mkdir(parents=True)
    (run / "request.json").write_text(json.dumps({"model_name": model}))
    for folder in (run, run / "checkpoint-2"):
        (folder / "adapter_model.safetensors").write_bytes(b"w")
        (folder / "adapter_config.json").write_text(json.dumps({"base_model_name_or_path": model}))
    return run


def test_generation_flags_come_from_the_settings_schema():
    args = build_parser().parse_args(["chat", "base", "--temperature", "0", "--max-new-tokens", "7", "--prompt", "hi"])
    assert settings_from(args) == GenerationSettings(temperature=0, max_new_tokens=7)
    assert (args.run, args.prompt, args.system) == ("base", "hi", None)
    help_text = build_parser()._subparsers._group_actions[0].choices["chat"].format_help()
    for name in GenerationSettings.model_fields:
        assert "--" + name.replace("_", "-") in help_text
    assert "Sampling temperature" in help_text


def test_run_folders_checkpoints_and_base_become_choices(tmp_path):
    run = _run_folder(tmp_path)
    final = choice_for(str(run))
    assert (final.kind, final.adapter, final.base_model, final.path) == ("final", True, "org/base", str(run))
    checkpoint = choice_for(str(run / "checkpoint-2"))
    assert (checkpoint.kind, checkpoint.base_model) == ("checkpoint", "org/base")
    assert choice_for("base").base_model == DEFAULT_MODEL
    assert choice_for("base", "org/other").base_model == "org/other"


@pytest.mark.parametrize(
    "argv, message",
    [
        (["chat", "{tmp}/missing", "--prompt", "hi"], "is not a folder"),
        (["chat", "{tmp}", "--prompt", "hi"], "has no model weights"),
        (
            ["chat", "{tmp}/run", "--temperature", "3", "--prompt", "hi"],
            "temperature: Input should be less than or equal to 2",
        ),
    ],
)
def test_bad_input_exits_2_with_the_reason(tmp_path, capsys, argv, message):
    _run_folder(tmp_path)
    assert main([a.replace("{tmp}", str(tmp_path)) for a in argv]) == 2
    captured = capsys.readouterr()
    assert message in captured.err and captured.out == ""


def test_a_run_without_final_weights_names_its_checkpoints(tmp_path, capsys):
    run = _run_folder(tmp_path)
    (run / "adapter_model.safetensors").unlink()
    (run / "checkpoint-2" / "trainer_state.json").write_text("{}")
    assert main(["chat", str(run), "--prompt", "hi"]) == 2
    assert "its checkpoints: checkpoint-2" in capsys.readouterr().err
