"""Secrets are refused at start-up when blank or short, with how to make one, never echoed."""

import subprocess
import sys

import pytest
from pydantic import ValidationError

from tests.support.api_server import REPO
from trainer_core.settings import Settings


@pytest.mark.parametrize(
    "values, words",
    [
        ({"api_token": ""}, "STUDIO_API_TOKEN is set but has 0 characters"),
        ({"api_token": "short-token"}, "needs at least 16"),
        ({"username": "ada", "password": "short"}, "STUDIO_PASSWORD is set but has 5 characters"),
        ({"username": "ada"}, "set both STUDIO_USERNAME"),
        ({"username": " ", "password": "long-enough-1"}, "STUDIO_USERNAME (not blank)"),
    ],
)
def test_weak_secrets_are_refused(values, words):
    with pytest.raises(ValidationError, match=words.replace("(", r"\(").replace(")", r"\)")):
        Settings(**values)


def test_the_app_refuses_to_start_with_a_blank_token_without_echoing_it(tmp_path):
    env = {"STUDIO_DATA_DIR": str(tmp_path), "STUDIO_API_TOKEN": "tiny-secret-7", "PATH": "/usr/bin:/bin"}
    result = subprocess.run(
        [sys.executable, "app.py", "--port", "1"], cwd=REPO, env=env, capture_output=True, text=True, timeout=120
    )
    assert result.returncode != 0 and "STUDIO_API_TOKEN is set but has 13 characters" in result.stderr
    assert "secrets.token_urlsafe" in result.stderr and "tiny-secret-7" not in result.stderr + result.stdout
