"""Kept uploads named on the page as the user's files were (``ui.uploads.shown_names``)."""

from __future__ import annotations

from trainer_core.settings import Settings
from ui.uploads import shown_names


def test_a_kept_upload_is_named_as_the_preview_names_it(tmp_path):
    settings = Settings(data_dir=tmp_path / "studio")
    settings.uploads_dir.mkdir(parents=True)
    kept = settings.uploads_dir / "mllm_demo-0732db8e2351.json"
    kept.write_text("[]")
    packed = settings.uploads_dir / "rows-00112233aabb.jsonl.zst"
    packed.write_text("")
    said = (
        f"Dataset files: {kept}: row 3 has no 'images'; mllm_demo-0732db8e2351.json again; rows-00112233aabb.jsonl.zst"
    )
    assert shown_names(said, settings) == (
        "Dataset files: mllm_demo.json: row 3 has no 'images'; mllm_demo.json again; rows.jsonl.zst"
    )
    elsewhere = tmp_path / "mine" / "notes-0732db8e2351.json"  # not a kept upload: left as it is
    assert shown_names(f"{elsewhere} is missing", settings) == f"{elsewhere} is missing"
    assert shown_names("job_20250102_090000_0a0b0c0d failed", settings) == "job_20250102_090000_0a0b0c0d failed"
