"""Path confinement and the public-serving guard."""

import os

import pytest

from server import access_problem, is_loopback
from trainer_core.admission.request_paths import MissingPaths, checked_request
from trainer_core.paths import PathNotAllowed, confine
from trainer_core.schemas import TrainingStartRequest
from trainer_core.settings import Settings


def test_confine_allows_inside_and_refuses_dotdot_and_symlinks(tmp_path):
    root, outside = tmp_path / "root", tmp_path / "outside"
    root.mkdir(), outside.mkdir()
    (root / "a.json").write_text("[]")
    (outside / "secret.json").write_text("[]")
    os.symlink(outside / "secret.json", root / "link.json")
    os.symlink(outside, root / "dirlink")
    assert confine(str(root / "a.json"), [root], "f") == (root / "a.json").resolve()
    for bad in (
        root / ".." / "outside" / "secret.json",
        root / "link.json",
        root / "dirlink" / "secret.json",
        "/etc/hostname",
    ):
        with pytest.raises(PathNotAllowed, match="f: .* is outside the allowed folders"):
            confine(str(bad), [root], "f")


def test_checked_request_resolves_and_reports_missing(tmp_path):
    (tmp_path / "a.json").write_text("[]")
    request = TrainingStartRequest(local_datasets=[str(tmp_path / "x" / ".." / "a.json")])
    checked = checked_request(request, [tmp_path])
    assert checked.local_datasets == [str((tmp_path / "a.json").resolve())]
    with pytest.raises(MissingPaths) as info:
        checked_request(
            TrainingStartRequest(local_datasets=[str(tmp_path / f"{i}.json") for i in range(5)]), [tmp_path]
        )
    assert len(info.value.paths) == 3


def test_allowed_roots_from_env_list(tmp_path):
    settings = Settings(data_dir=tmp_path, allowed_paths=f"/a{os.pathsep}/b, /c")
    assert [str(p) for p in settings.allowed_roots][2:] == ["/a", "/b", "/c"]


def test_public_serving_needs_credentials():
    bare = Settings()
    assert is_loopback("127.0.0.1") and is_loopback("localhost") and is_loopback("::1") and not is_loopback("0.0.0.0")
    assert access_problem("127.0.0.1", False, False, bare) is None
    assert "STUDIO_USERNAME and STUDIO_PASSWORD and STUDIO_API_TOKEN" in access_problem("0.0.0.0", False, False, bare)
    assert "share link" in access_problem("127.0.0.1", True, False, bare)
    assert access_problem("0.0.0.0", True, True, bare) is None
    full = Settings(username="u", password="password-1", api_token="t" * 16)
    assert access_problem("0.0.0.0", True, False, full) is None
    assert "STUDIO_API_TOKEN" in access_problem("0.0.0.0", False, False, Settings(username="u", password="password-1"))


def test_values_that_cannot_be_paths_are_refused_by_name(tmp_path):
    for bad, words in (
        ("a\x00b", "not a valid path"),
        ("", "not a valid path"),
        (str(tmp_path / ("n" * 300)), "longer than 255 bytes"),
    ):
        with pytest.raises(PathNotAllowed, match=f"field: .*{words}"):
            confine(bad, [tmp_path], "field")
    long_message = str(pytest.raises(PathNotAllowed, confine, "/x" * 3000, [tmp_path], "field").value)
    assert len(long_message) < 600
