"""Reward functions as code: a Python file of the user's, for GRPO runs.

The file is read from the allowed folders only (the request's ``reward_file`` is confined like every
other path) and only on a server that sets ``STUDIO_ALLOW_REWARD_CODE=1``: its functions run inside
the training worker as the server's user (SECURITY.md). The studio process never runs it: Check and
Start parse it (``ast``) to list its functions; the worker imports it (``load_functions``).

A reward function has TRL's signature (``trl.GRPOTrainer``, "Using a custom reward function"):
``def my_reward(prompts, completions, completion_ids, **kwargs) -> list[float | None]``, where
``kwargs`` holds the data's other columns as lists aligned with ``completions``.
"""

from __future__ import annotations

import ast
import importlib.util
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, Optional

from trainer_core.refusals import Refusal

SWITCH = "STUDIO_ALLOW_REWARD_CODE"
MAX_BYTES = 1_000_000


class RewardCodeError(Refusal):
    """``reward_file`` cannot be used: switched off on this server, not a readable Python file, or
    without the functions the run names. The message names the field and the fix."""

    code = "reward_code_refused"


def refused_reason() -> str:
    """Why a server without the switch refuses reward code (shown at Check and Start)."""
    return (
        "reward_file: this server does not run reward code (its functions would run inside the "
        f"training worker as the server's user); the server's operator enables it with {SWITCH}=1 "
        "(see SECURITY.md), or choose built-in rewards instead"
    )


def public_functions(path: Path) -> list[str]:
    """The names of the top-level functions of the Python file ``path`` whose names do not start
    with ``_``, in file order, found by parsing (the file is not run). Raises RewardCodeError when
    it is not a ``.py`` file (the worker imports it as a module), cannot be read, is over 1 MB, is
    not Python, or defines no such function."""
    if path.suffix != ".py":
        raise RewardCodeError(
            f"reward_file: {path.name} is not a .py file; the worker imports it as a Python module: "
            "save the functions in a file ending in .py",
            fields=("reward_file",),
        )
    try:
        if path.stat().st_size > MAX_BYTES:
            raise RewardCodeError(
                f"reward_file: {path.name} is over 1 MB: a reward file holds a few functions", fields=("reward_file",)
            )
        source = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise RewardCodeError(f"reward_file: file not found: {path}", fields=("reward_file",)) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise RewardCodeError(
            f"reward_file: {path.name} cannot be read as UTF-8 text ({exc})", fields=("reward_file",)
        ) from None
    try:
        tree = ast.parse(source, filename=path.name)
    except SyntaxError as exc:
        raise RewardCodeError(
            f"reward_file: {path.name} line {exc.lineno}: {exc.msg}: fix the Python", fields=("reward_file",)
        ) from None
    names = [
        node.name
        for node in tree.body
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and not node.name.startswith("_")
    ]
    if not names:
        raise RewardCodeError(
            f"reward_file: {path.name} defines no reward function: add def my_reward(prompts, completions, "
            "completion_ids, **kwargs) returning one float per completion",
            fields=("reward_file",),
        )
    return names


def check_reward_code(reward_file: Optional[str], wanted: list[str], allowed: bool) -> list[str]:
    """The functions a run will use from ``reward_file`` (already confined): ``wanted`` (the
    ``code`` rewards' names; all its public functions when empty). Raises RewardCodeError when the
    switch is off (``allowed`` False), ``wanted`` names code but no file is given, or the file
    lacks a wanted function."""
    if reward_file is None:
        if wanted:
            raise RewardCodeError(
                f"rewards: code reward {wanted[0]!r} needs reward_file, the Python file that defines it",
                fields=("rewards", "reward_file"),
            )
        return []
    if not allowed:
        raise RewardCodeError(refused_reason(), fields=("reward_file",))
    names = public_functions(Path(reward_file))
    missing = [name for name in wanted if name not in names]
    if missing:
        raise RewardCodeError(
            f"rewards: reward_file {Path(reward_file).name} has no function {missing[0]!r} (it defines "
            f"{', '.join(names)})",
            fields=("rewards", "reward_file"),
        )
    return wanted or names


def load_functions(reward_file: str, names: list[str]) -> list[Callable[..., Any]]:
    """Import ``reward_file`` (in the training worker only) and return its functions ``names``.
    Raises RewardCodeError when importing it fails or a name is not a callable."""
    path = Path(reward_file)
    spec = importlib.util.spec_from_file_location(f"studio_rewards_{abs(hash(str(path)))}", path)
    if spec is None or spec.loader is None:
        raise RewardCodeError(f"reward_file: {path.name} cannot be imported", fields=("reward_file",))
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    try:
        spec.loader.exec_module(module)
    except Exception as exc:  # noqa: BLE001 - the user's code: report any failure as theirs
        raise RewardCodeError(
            f"reward_file: importing {path.name} failed: {type(exc).__name__}: {exc}", fields=("reward_file",)
        ) from None
    found = []
    for name in names:
        function = getattr(module, name, None)
        if not callable(function):
            raise RewardCodeError(f"reward_file: {path.name}: {name} is not a function", fields=("reward_file",))
        found.append(function)
    return found
