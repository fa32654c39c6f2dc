"""A GRPO request's rewards -> TRL's ``reward_funcs`` and ``reward_weights``.

What a run is rewarded for: the request's ``rewards`` (built-in functions, ``rewards.library``, and
``code`` ones from ``reward_file``); with none chosen, every public function of ``reward_file``
(weight 1) when one is given, else the numeric match of the final answer against the data's
``answer`` column when it has one (the GSM8K-style default). A run with no reward is refused.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Optional

from trainer_core.rewards.code_file import RewardCodeError, check_reward_code, load_functions
from trainer_core.rewards.library import make_reward
from trainer_core.rewards.schemas import RewardSpec

DEFAULT_COLUMN = "answer"


class RewardError(ValueError):
    """A GRPO run's rewards cannot be built from its data (no reward, a missing column); the
    message names the field and the fix."""


def chosen_rewards(
    request: Any, columns: Optional[list[str]], code_names: Optional[list[str]] = None
) -> list[RewardSpec]:
    """The rewards ``request`` will be trained with (see the module): its ``rewards``, or the code
    functions ``code_names`` of its ``reward_file``, or the default answer match when ``columns``
    (the prompt rows' columns; None: not known yet) hold ``answer``. Raises RewardError when there
    is none, or when a reward reads a column ``columns`` lacks."""
    specs = list(request.rewards)
    if not specs and request.reward_file:
        specs = [RewardSpec(name="code", function=name) for name in code_names or []]
    if not specs and (columns is None or DEFAULT_COLUMN in columns):
        specs = [RewardSpec(name="numeric_match", column=DEFAULT_COLUMN)]
    if not specs:
        raise RewardError(
            "rewards: GRPO needs at least one reward: choose one under Rewards (e.g. format, length or json), "
            f"give the data an {DEFAULT_COLUMN!r} column for the default answer match (custom_format_mapping "
            "can name yours), or give reward_file"
        )
    if columns is not None:
        for spec in specs:
            if spec.column and spec.column not in columns:
                raise RewardError(
                    f"rewards: {spec.name} reads column {spec.column!r}, which the data lacks (its columns: "
                    f"{', '.join(columns)}): name another column, or map yours with custom_format_mapping"
                )
    return specs


def labels(specs: list[RewardSpec]) -> list[str]:
    """Unique names for ``specs`` (``RewardSpec.label``, a second one of a kind suffixed ``_2``)."""
    seen: dict[str, int] = {}
    out = []
    for spec in specs:
        base = spec.label
        seen[base] = seen.get(base, 0) + 1
        out.append(base if seen[base] == 1 else f"{base}_{seen[base]}")
    return out


def code_function_names(request: Any, allowed: bool) -> list[str]:
    """The reward-file functions ``request`` uses, checked without running the file
    (``code_file.check_reward_code``). Raises RewardCodeError."""
    wanted = [str(spec.function) for spec in request.rewards if spec.name == "code"]
    return check_reward_code(request.reward_file, wanted, allowed)


def reward_functions(
    request: Any, columns: list[str], allowed: bool
) -> tuple[list[Callable[..., Any]], list[float], list[str]]:
    """(TRL ``reward_funcs``, ``reward_weights``, their names) for a GRPO ``request`` on rows with
    ``columns``, importing ``reward_file`` (``allowed``: the server's switch; call this in the
    training worker only). Raises RewardError or RewardCodeError."""
    code_names = code_function_names(request, allowed)
    specs = chosen_rewards(request, columns, code_names)
    names = labels(specs)
    code = iter(
        load_functions(request.reward_file, [str(s.function) for s in specs if s.name == "code"])
        if request.reward_file
        else []
    )
    functions = []
    for spec, name in zip(specs, names):
        if spec.name == "code":
            function = next(code)
            functions.append(_renamed(function, name))
        else:
            functions.append(make_reward(spec, request.max_completion_length, name))
    return functions, [spec.weight for spec in specs], names


def _renamed(function: Callable[..., Any], name: str) -> Callable[..., Any]:
    """``function`` under ``name`` (TRL logs a reward under its ``__name__``), itself untouched."""

    def reward(*args: Any, **kwargs: Any) -> Any:
        return function(*args, **kwargs)

    reward.__name__ = reward.__qualname__ = name
    return reward


__all__ = ["RewardCodeError", "RewardError", "chosen_rewards", "code_function_names", "labels", "reward_functions"]
