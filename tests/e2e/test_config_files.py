"""The form saved as YAML and loaded back, and the command preview, through the
page's own events (raw Gradio queue calls with a login, as the page sends them), attacker cases
included: a file value the server never received, a file outside, a secret typed in the form."""

from __future__ import annotations

import html
import json
from pathlib import Path

import yaml

from tests.e2e.conftest import CANARY, alpaca, form_args, logged_in
from tests.support.raw_gradio import RawGradio, error_text, file_value
from trainer_core.fieldmeta import default
from ui.form import FORM_FIELDS

HF_TOKEN = "hf_ConfigSecretThatMustNotBeSaved7"
CHANGED = dict(
    learning_rate=0.0005,
    lora_r=8,
    num_epochs=2,
    max_seq_length=256,
    packing=True,
    target_modules=["q_proj", "v_proj"],
    custom_format_mapping="instruction=question, output=answer",
    lr_scheduler_type="linear",
    val_size=0.1,
)


def _upload(client, path: Path) -> str:
    """Upload ``path`` as the page does; returns the server's temporary path."""
    with path.open("rb") as fh:
        answer = client.post("/gradio_api/upload", files={"files": (path.name, fh)})
    assert answer.status_code == 200, answer.text
    return answer.json()[0]


def test_saved_yaml_loads_back_into_the_same_form(studio, datasets_dir, tmp_path):
    settings, runner, url = studio
    client = logged_in(url)
    raw = RawGradio(client)
    args = form_args(alpaca(datasets_dir), hf_token=HF_TOKEN, **CHANGED)
    saved = raw.call(raw.fn_index("settings_save"), args)
    assert saved["success"], error_text(saved)
    file_out, notice = saved["output"]["data"]
    assert notice == ""
    served = client.get(f"/gradio_api/file={file_out['value']['path']}")
    assert served.status_code == 200
    text = served.text
    assert HF_TOKEN not in text and "hf_token" not in text
    values = yaml.safe_load(text)
    assert values["learning_rate"] == 0.0005 and values["lora_r"] == 8 and values["packing"] is True
    assert values["custom_format_mapping"] == {"instruction": "question", "output": "answer"}
    assert values["local_datasets"] == [alpaca(datasets_dir)]
    # the same file, uploaded again, fills every widget with what was saved
    local = tmp_path / "settings.yaml"
    local.write_text(text)
    loaded = raw.call(raw.fn_index("settings_load"), [file_value(_upload(client, local))])
    assert loaded["success"], error_text(loaded)
    data = loaded["output"]["data"]
    upload, paths, eval_upload, eval_paths, *widgets, notice = data
    assert notice == "" and paths == alpaca(datasets_dir) and eval_paths == ""
    sent = dict(zip(FORM_FIELDS, args[4:]))
    got = dict(zip(FORM_FIELDS, widgets))
    for name in FORM_FIELDS:
        if name == "hf_token":
            assert not isinstance(got[name], str) or got[name] == ""  # never loaded from a file
        else:
            assert got[name] == sent[name] or float(got[name]) == float(sent[name]), (name, got[name], sent[name])


def test_bad_files_change_nothing_and_say_why(studio, datasets_dir, tmp_path, outside):
    settings, runner, url = studio
    client = logged_in(url)
    raw = RawGradio(client)
    load = raw.fn_index("settings_load")
    cases = {
        "typo.yaml": ("lerning_rate: 0.001\n", "did you mean 'learning_rate'"),
        "bounds.yaml": ("learning_rate: 5\n", "learning_rate: Input should be less than 1"),
        "list.yaml": ("- a\n- b\n", "must be a mapping"),
        "broken.yaml": ("a: [\n", "not valid YAML"),
    }
    for name, (text, expected) in cases.items():
        (tmp_path / name).write_text(text)
        answer = raw.call(load, [file_value(_upload(client, tmp_path / name))])
        assert answer["success"], error_text(answer)
        *widgets, notice = answer["output"]["data"]
        assert "Not loaded" in notice and html.escape(expected) in notice, (name, notice)
        assert all(isinstance(w, dict) and w.get("__type__") == "update" for w in widgets), name  # nothing changed
    # a file value the server never received is refused without reading it
    (outside / "x.yaml").write_text(f"output_dir: {CANARY}\n")
    for target in (outside / "x.yaml", Path("/etc/passwd")):
        answer = raw.call(load, [file_value(str(target))])
        assert CANARY not in json.dumps(answer) and "not uploaded" in json.dumps(answer)
    # a setting the schema refuses is not saved
    saved = raw.call(raw.fn_index("settings_save"), form_args(alpaca(datasets_dir), warmup_steps=5, warmup_ratio=0.1))
    assert saved["success"] and "Not saved" in saved["output"]["data"][1]


def test_command_preview_shows_only_changes_and_no_secret(studio, datasets_dir):
    settings, runner, url = studio
    raw = RawGradio(logged_in(url))
    answer = raw.call(raw.fn_index("command_preview"), form_args(alpaca(datasets_dir), hf_token=HF_TOKEN, **CHANGED))
    assert answer["success"], error_text(answer)
    cli, curl = answer["output"]["data"]
    assert HF_TOKEN not in cli + curl and settings.api_token.get_secret_value() not in curl
    assert cli.startswith("python -m trainer_core train") and f"--dataset {alpaca(datasets_dir)}" in cli
    assert "--learning-rate 0.0005" in cli and "--packing" in cli and "--target-modules q_proj v_proj" in cli
    assert "--batch-size" not in cli  # left at its default
    assert url.removeprefix("http://") + "/api/train/start" in curl  # the address the page was opened at
    assert '"learning_rate": 0.0005' in curl and "$STUDIO_API_TOKEN" in curl and "/api/train/start" in curl
    assert "hf_token" in curl.splitlines()[0]  # says it was left out
    body = json.loads(curl.split("-d '", 1)[1].rsplit("'", 1)[0])
    assert set(body) <= set(FORM_FIELDS) | {"local_datasets", "local_eval_datasets"}
    assert all(body[k] != default(k) for k in body)
