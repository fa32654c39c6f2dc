"""The ``recipe`` command without a model: the templates listed and shown, and bad input refused
with exit code 2 and the refusal's code (a broken recipe, an unset key variable, a remote endpoint)."""

from __future__ import annotations

import yaml

from tests.support.cli_here import cli_main
from trainer_core.cli import recipe as recipe_command
from trainer_core.cli.main import COMMANDS, build_parser
from trainer_core.recipes.library import template_names, template_text


def test_run_flags_parse():
    args = build_parser().parse_args(["recipe", "run", "r.yaml", "--preview", "5", "--api-key-env", "KEY"])
    assert (args.command, args.action, args.preview, args.api_key_env) == ("recipe", "run", 5, "KEY")
    assert COMMANDS["recipe"] is recipe_command.run
    args = build_parser().parse_args(["recipe", "run", "r.yaml", "--resume", "qa-1", "--push-to", "me/qa", "--public"])
    assert (args.resume, args.push_to, args.public) == ("qa-1", "me/qa", True)


def test_templates_are_listed_and_shown(capsys):
    assert cli_main(["recipe", "templates"]) == 0
    assert capsys.readouterr().out.split() == template_names()
    assert cli_main(["recipe", "show", "multi_turn"]) == 0
    assert capsys.readouterr().out == template_text("multi_turn")


def _write(tmp_path, **model) -> str:
    data = yaml.safe_load(template_text("embedding_pairs"))
    data["documents"] = [str(tmp_path / "docs")]
    data["model"].update(model)
    (tmp_path / "docs").mkdir(exist_ok=True)
    (tmp_path / "docs" / "a.md").write_text("# A\n\nSome text to ask about.\n", encoding="utf-8")
    (tmp_path / "r.yaml").write_text(yaml.safe_dump(data), encoding="utf-8")
    return str(tmp_path / "r.yaml")


def test_bad_input_is_exit_code_2_with_the_refusal(tmp_path, capsys):
    env = {"STUDIO_DATA_DIR": str(tmp_path)}
    (tmp_path / "broken.yaml").write_text("name: x\ncolumns: 3\n", encoding="utf-8")
    assert cli_main(["recipe", "run", str(tmp_path / "broken.yaml")], **env) == 2
    assert capsys.readouterr().err.startswith("error [invalid_setting]: broken.yaml: ")
    assert cli_main(["recipe", "run", _write(tmp_path, api_key_env="RECIPE_KEY_NOT_SET")], **env) == 2
    assert "error [recipe_invalid]: model.api_key_env: the environment variable RECIPE_KEY_NOT_SET is not set" in (
        capsys.readouterr().err
    )
    remote = _write(tmp_path, endpoint="https://api.example.com/v1", api_key_env=None)
    assert cli_main(["recipe", "run", remote], **env) == 2
    assert "error [remote_writer_model]: model.endpoint: https://api.example.com/v1 is not on this machine" in (
        capsys.readouterr().err
    )


def test_resume_and_push_refusals_name_their_flag(tmp_path, capsys):
    env = {"STUDIO_DATA_DIR": str(tmp_path / "data")}
    recipe = _write(tmp_path, api_key_env=None)
    (tmp_path / "data" / "recipes").mkdir(parents=True)
    for extra, words in (
        (["--resume", "../.."], "error [path_not_allowed]: resume: "),
        (["--resume", str(tmp_path)], "error [path_not_allowed]: resume: "),
        (["--resume", "no-such-run"], "error [not_found]: resume: no recipe result folder 'no-such-run'"),
        (["--push-to", "just-a-name"], "error [recipe_invalid]: --push-to: 'just-a-name' must be owner/name"),
        (["--preview", "2", "--resume", "x"], "error [recipe_invalid]: --preview writes nothing"),
    ):
        assert cli_main(["recipe", "run", recipe, *extra], **env) == 2, extra
        assert words in capsys.readouterr().err, extra
    assert list((tmp_path / "data" / "recipes").iterdir()) == []  # refused before a folder was made
