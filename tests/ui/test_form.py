"""UI form: widgets come from the schema's metadata; form values become a validated request."""

import gradio as gr
import pytest

from trainer_core.fieldmeta import FIELDS
from ui import form


def _values(**overrides):
    values = {name: form.default(name) for name in form.FORM_FIELDS}
    values["hf_token"] = ""
    values["custom_format_mapping"] = ""
    values.update(overrides)
    return values


def test_widgets_follow_the_schema():
    with gr.Blocks():
        lr = form.make_widget("learning_rate")
        rank = form.make_widget("lora_r")
        kind = form.make_widget("training_type")
        token = form.make_widget("hf_token")
    assert lr.value == FIELDS["learning_rate"].default and lr.maximum == 1 and lr.minimum == 0
    assert rank.precision == 0 and rank.minimum == 1 and rank.maximum == 1024
    assert [c[0] for c in kind.choices] == ["lora", "qlora", "full"]
    assert token.type == "password"
    assert lr.info == FIELDS["learning_rate"].description


def test_build_request_from_form_values():
    request = form.build_request(
        _values(max_steps=4.0, custom_format_mapping="instruction=question, output=answer", output_dir=""),
        ["train.json"],
        [],
    )
    assert request.max_steps == 4 and isinstance(request.max_steps, int)
    assert request.custom_format_mapping == {"instruction": "question", "output": "answer"}
    assert request.dataset_slice_end == 0 and request.output_dir is None and request.hf_token is None


@pytest.mark.parametrize(
    "overrides, needle",
    [
        ({"learning_rate": 2.0}, "learning_rate"),
        ({"num_epochs": 0, "max_steps": 0}, "num_epochs and max_steps are both 0"),
        ({"custom_format_mapping": "instruction"}, "custom_format_mapping"),
    ],
)
def test_bad_settings_raise_gr_error_naming_the_field(overrides, needle):
    with pytest.raises(gr.Error) as info:
        form.build_request(_values(**overrides), ["train.json"], [])
    assert needle in str(info.value)


def test_no_dataset_is_a_clear_error():
    with pytest.raises(gr.Error, match="no training data"):
        form.build_request(_values(), [], [])


def test_the_untouched_form_is_a_valid_request_and_list_fields_take_names():
    """Each widget's own initial value (not the schema default) builds the request Start sends:
    a list field shown as a text box would send "" and refuse every Start."""
    with gr.Blocks():
        widgets = {name: form.make_widget(name) for name in form.FORM_FIELDS}
    request = form.build_request({name: w.value for name, w in widgets.items()}, ["train.json"], [])
    assert request.modules_to_save == [] and request.target_modules == ["all-linear"]
    for name in ("target_modules", "modules_to_save"):
        assert isinstance(widgets[name], gr.Dropdown) and widgets[name].multiselect
        assert widgets[name].allow_custom_value
    picked = form.build_request(
        {name: w.value for name, w in widgets.items()} | {"modules_to_save": ["embed_tokens", "lm_head"]},
        ["train.json"],
        [],
    )
    assert picked.modules_to_save == ["embed_tokens", "lm_head"]
    # the browser sends an empty number box as 0: an optional rate stays unset
    values = {name: w.value for name, w in widgets.items()} | {"embedding_learning_rate": 0}
    assert form.build_request(values, ["train.json"], []).embedding_learning_rate is None


def test_a_three_state_switch_words_its_empty_choice_as_its_help_does():
    """is_embedding is found from the model, is_dataset_image from the data: each label as its help."""
    with gr.Blocks():
        embedding = form.make_widget("is_embedding")
        images = form.make_widget("is_dataset_image")
    assert embedding.choices[0] == ("found from the model", "")
    assert FIELDS["is_embedding"].description.startswith("Empty: found from the model")
    assert images.choices[0] == ("found from the data", "") and images.choices[1:] == embedding.choices[1:]
    assert form.tri_state("no wording") == form.TRI_STATE
