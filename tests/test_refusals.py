"""Refusals in the page's words: field names become on-screen labels, the named widgets are listed
for marking, and the notice escapes what the user typed."""

from ui.refusals import describe, label_of, notice_html


def test_field_names_become_labels_with_their_section():
    refusal = describe("max_seq_length: Input should be greater than or equal to 16")
    assert refusal.text == "Max seq length: Input should be greater than or equal to 16"
    assert refusal.fields == ("max_seq_length",) and refusal.element_ids == ("field-max_seq_length",)
    assert refusal.section_ids == ()  # always on screen
    assert describe("hf_token: bad").section_ids == ("section-model",)  # in the closed Model options


def test_dataset_fields_name_both_widgets_and_sections_are_opened():
    refusal = describe("settings: no training data: give local_datasets (files) or hf_dataset (a hub id)")
    assert refusal.text.startswith("no training data")
    assert "Training dataset" in refusal.text and "Hub dataset (Data options)" in refusal.text
    assert "local_datasets" not in refusal.text and "hf_dataset" not in refusal.text
    assert refusal.element_ids == ("train-upload", "train-paths", "field-hf_dataset")
    assert refusal.section_ids == ("section-data",)
    lr = describe("learning_rate: Input should be less than 1")
    assert lr.text.startswith("Learning rate (Hyperparameters)") and lr.section_ids == ("section-training",)


def test_one_word_fields_only_where_used_as_a_field():
    assert describe("packing: not with this model").fields == ("packing",)
    assert describe("the subset of rows that fit").fields == ()  # prose, not the field
    assert describe("Training dataset (upload): this file was not uploaded to this server").fields == (
        "local_datasets",
    )


def test_notice_escapes_user_text_and_lists_fields():
    html = notice_html("local_datasets: file not found: /data/<script>alert(1)</script>.json")
    assert "<script>" not in html and "&lt;script&gt;" in html
    assert 'data-fields="train-upload train-paths"' in html and html.startswith('<div class="refusal" role="alert"')
    assert label_of("lora_r") == "LoRA rank (lora_r)" and label_of("max_steps") == "Max steps"


def test_names_inside_paths_are_left_as_typed():
    refusal = describe("file not found: /data/learning_rate/train_data.json (model_name.json)")
    assert (
        refusal.text == "file not found: /data/learning_rate/train_data.json (model_name.json)" and refusal.fields == ()
    )
