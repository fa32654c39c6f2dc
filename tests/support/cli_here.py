"""The CLI's ``main`` called in the test's own process with ``STUDIO_*`` settings of the test's own,
for tests of what a command does rather than of its process (``python -m trainer_core`` as a user
runs it: tests/e2e/test_cli.py and the other tests that start it)."""

from __future__ import annotations

import os


def cli_main(argv: list[str], **env: str) -> int:
    """``trainer_core.cli.main(argv)`` with ``env`` (``STUDIO_*`` variables) set in ``os.environ`` and
    the cached settings (``get_settings``) read anew; both are put back afterwards. Returns the exit
    code."""
    from trainer_core.cli import main
    from trainer_core.settings import get_settings

    before = {name: os.environ.get(name) for name in env}
    os.environ.update(env)
    get_settings.cache_clear()
    try:
        return main(argv)
    finally:
        for name, value in before.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
        get_settings.cache_clear()
