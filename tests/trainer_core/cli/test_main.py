"""CLI flags are generated from the schema; config file + flags -> request."""

import pytest

from trainer_core.cli import build_parser, request_from_args


def test_flags_config_and_precedence(tmp_path):
    config = tmp_path / "run.yaml"
    config.write_text("learning_rate: 0.001\nlora_r: 8\nmax_steps: 10\n")
    args = build_parser().parse_args(
        [
            "train",
            "--dataset",
            "a.json",
            "--config",
            str(config),
            "--max-steps",
            "3",
            "--no-train-on-completions",
            "--target-modules",
            "q_proj",
            "v_proj",
            "--custom-format-mapping",
            "instruction=q",
            "output=a",
        ]
    )
    request = request_from_args(args)
    assert request.max_steps == 3 and request.learning_rate == 0.001 and request.lora_r == 8
    assert request.train_on_completions is False
    assert request.target_modules == ["q_proj", "v_proj"]
    assert request.custom_format_mapping == {"instruction": "q", "output": "a"}
    assert request.local_datasets == [str((tmp_path.cwd() / "a.json").resolve())]


def test_enum_flags_are_checked():
    with pytest.raises(SystemExit):
        build_parser().parse_args(["train", "--dataset", "a.json", "--training-type", "dora"])


def test_train_refuses_more_processes_than_the_machine_has(tmp_path, capsys):
    from trainer_core.cli import main

    data = tmp_path / "a.jsonl"
    data.write_text('{"instruction": "hi", "output": "hello"}\n')
    assert main(["train", "--dataset", str(data), "--num-processes", "64"]) == 2
    assert "num_processes (64) is more than the" in capsys.readouterr().err
    assert main(["train", "--dataset", str(data), "--gpu-ids", "0;id"]) == 2
    assert "gpu_ids: '0;id' is not a list of GPU numbers" in capsys.readouterr().err


def test_grpo_rewards_from_flags_and_yaml(tmp_path):
    config = tmp_path / "grpo.yaml"
    config.write_text(
        "training_method: grpo\nnum_generations: 2\nrewards:\n  - name: numeric_match\n    column: solution\n"
        "  - format weight=0.5\n"
    )
    args = build_parser().parse_args(["train", "--dataset", "a.json", "--config", str(config)])
    request = request_from_args(args)
    assert [(r.name, r.column, r.weight) for r in request.rewards] == [
        ("numeric_match", "solution", 1.0),
        ("format", None, 0.5),
    ]
    flags = ["train", "--dataset", "a.json", "--training-method", "grpo", "--rewards", "length target_length=20"]
    request = request_from_args(build_parser().parse_args([*flags, "--grpo-loss-type", "dr_grpo"]))
    assert request.rewards[0].target_length == 20 and request.grpo_loss_type == "dr_grpo"


def test_train_and_check_pass_the_admission_of_the_page_and_the_api(tmp_path, capsys):
    """``train`` goes through ``admission.admit`` and ``check`` through ``checked_for_preflight``, with
    every folder of the machine allowed (the data lies outside the studio's folders): a model name
    that is neither a Hub id nor a folder is refused in the API's words with exit 2, before any
    worker (the training worker used to find it)."""
    from trainer_core.cli import main

    data = tmp_path / "a.jsonl"
    data.write_text('{"instruction": "hi", "output": "hello"}\n')
    for command in ("train", "check"):
        assert main([command, "--dataset", str(data), "--model-name", "not a model"]) == 2
        assert capsys.readouterr().err.startswith("error: model_name: 'not a model' is not a Hub id"), command
