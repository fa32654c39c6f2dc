"""The README's map of the code is the one ``scripts/file_map.py`` makes from the packages' docstrings."""

import importlib.util

from tests.conftest import REPO


def test_the_readme_map_of_the_code_is_current():
    spec = importlib.util.spec_from_file_location("file_map", REPO / "scripts" / "file_map.py")
    file_map = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(file_map)
    assert file_map.main(["--check"]) == 0, "run: python3 scripts/file_map.py --write"
    assert "`trainer_core/runs/` — The single-job runner" in file_map.file_map()
