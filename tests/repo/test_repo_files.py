"""The README's Space front matter matches space.yaml, and CI runs the README's test command."""

from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[2]


def _front_matter() -> dict:
    text = (REPO / "README.md").read_text(encoding="utf-8")
    assert text.startswith("---\n"), "README.md must start with the Hugging Face Spaces front matter"
    return yaml.safe_load(text.split("---\n", 2)[1])


def test_space_settings_in_step():
    assert _front_matter() == yaml.safe_load((REPO / "space.yaml").read_text(encoding="utf-8"))


def test_ci_runs_the_readme_test_command():
    """The README's install and test commands (its first ``setup.sh --dev`` and plain ``pytest``
    lines) are lines of .ci/run: CI runs every lane the README's command runs."""
    readme = [line.split("#")[0].strip() for line in (REPO / "README.md").read_text(encoding="utf-8").splitlines()]
    ci = [line.strip() for line in (REPO / ".ci" / "run").read_text(encoding="utf-8").splitlines()]
    install = next(line for line in readme if line.startswith("bash scripts/setup.sh --dev"))
    test = next(line for line in readme if line.startswith("python3 -m pytest"))
    assert install in ci and test == "python3 -m pytest"
    assert any(line.startswith(test + " ") or line == test for line in ci)


def test_requirements_pin_torch():
    assert "torch==2.13.0" in (REPO / "requirements.txt").read_text().splitlines()
