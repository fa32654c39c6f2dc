"""The installable package: pyproject.toml lists the same pins as requirements.txt (Spaces installs
that file) and requirements-dev.txt, and ``pip install .`` into a fresh virtual environment gives
the two console scripts, which work from any directory."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import tomllib
import venv
from pathlib import Path

import pytest

from tests.conftest import REPO

PYPROJECT = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))


def requirement_lines(path: Path) -> list[str]:
    """The requirement specifiers of a requirements file, comments and blank lines dropped."""
    lines = (line.split("#", 1)[0].strip() for line in path.read_text(encoding="utf-8").splitlines())
    return [line for line in lines if line and not line.startswith("-")]


def test_requirements_files_list_the_pyproject_pins():
    assert requirement_lines(REPO / "requirements.txt") == PYPROJECT["project"]["dependencies"]
    assert requirement_lines(REPO / "requirements-dev.txt") == PYPROJECT["project"]["optional-dependencies"]["dev"]


def test_every_dependency_is_pinned_except_tqdm():
    loose = [r for r in PYPROJECT["project"]["dependencies"] if not re.search(r"==\d", r)]
    assert loose == ["tqdm"]


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_pip_install_gives_both_commands_working_from_any_directory(tmp_path):
    """A copy of the tracked files is installed (the work tree stays clean) into a venv that sees
    this interpreter's packages (so nothing is downloaded: the pinned dependencies are there)."""
    source = tmp_path / "source"
    tracked = subprocess.run(["git", "ls-files", "-z"], cwd=REPO, capture_output=True, check=True).stdout
    for name in filter(None, tracked.decode().split("\0")):
        if (REPO / name).is_file():
            (source / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(REPO / name, source / name)
    env_dir = tmp_path / "venv"
    # Without ensurepip: its bundled setuptools (65 on Python 3.11) would shadow this interpreter's
    # and cannot read a PEP 639 licence string. This interpreter's pip installs into the venv.
    venv.EnvBuilder(system_site_packages=True, with_pip=False).create(env_dir)
    python = env_dir / "bin" / "python"
    installed = subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(python), "install", "-q", "--no-build-isolation", str(source)],
        capture_output=True,
        text=True,
        timeout=480,
    )
    assert installed.returncode == 0, installed.stderr[-3000:]
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    for command, expected in (("finetune-studio", "--share"), ("finetune-studio-cli", "usage: finetune-studio-cli")):
        done = subprocess.run(
            [str(env_dir / "bin" / command), "--help"], cwd=elsewhere, capture_output=True, text=True, timeout=120
        )
        assert done.returncode == 0 and expected in done.stdout, (command, done.stdout, done.stderr[-2000:])
    where = subprocess.run(
        [
            str(python),
            "-c",
            "import api, trainer_core, pathlib; print(trainer_core.__file__); "
            "print((pathlib.Path(api.__file__).parent / 'share_page.html').is_file())",
        ],
        cwd=elsewhere,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    ).stdout.split()
    assert where[0].startswith(str(env_dir)) and where[1] == "True"  # the installed copy, with its page
    assert sys.executable != str(python)
