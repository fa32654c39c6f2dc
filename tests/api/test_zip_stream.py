"""The task files' zip (``api.zip_stream``): every file under its listed name, read back by
``zipfile``; a file swapped for a link after the route's check ends the archive there, unread."""

from __future__ import annotations

import io
import zipfile

from api.zip_stream import stream_zip


def test_files_are_zipped_under_their_listed_names(tmp_path):
    (tmp_path / "sub").mkdir()
    (tmp_path / "a.bin").write_bytes(b"a" * 3_000_000)  # over one chunk
    (tmp_path / "sub" / "a.bin").write_bytes(b"b")
    body = b"".join(stream_zip([("a.bin", tmp_path / "a.bin"), ("sub/a.bin", tmp_path / "sub" / "a.bin")]))
    with zipfile.ZipFile(io.BytesIO(body)) as archive:
        assert archive.testzip() is None and archive.namelist() == ["a.bin", "sub/a.bin"]
        assert archive.read("a.bin") == b"a" * 3_000_000 and archive.read("sub/a.bin") == b"b"


def test_a_file_swapped_for_a_link_is_not_read(tmp_path):
    secret = tmp_path / "secret.txt"
    secret.write_text("CANARY-zip")
    (tmp_path / "ok.bin").write_bytes(b"ok")
    (tmp_path / "swapped.bin").symlink_to(secret)
    body = b"".join(stream_zip([("ok.bin", tmp_path / "ok.bin"), ("swapped.bin", tmp_path / "swapped.bin")]))
    assert b"CANARY-zip" not in body and b"ok" in body  # cut short after the first file
