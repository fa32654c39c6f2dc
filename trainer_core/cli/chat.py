"""``python -m trainer_core chat RUN [--prompt TEXT] [--system TEXT] [--temperature T] ...``: talk to
a run folder, ``RUN_FOLDER/checkpoint-N`` or ``base`` in the terminal.

Interactive by default (tokens print as they stream; ``/clear`` starts over, ``/exit`` or Ctrl-D
ends, Ctrl-C stops an answer); with ``--prompt`` prints one answer to stdout and exits 0.
Generation flags are built from ``GenerationSettings``' fields (help, defaults and bounds there).
It runs in this process with the same loading, rendering and generation code as the app's
inference worker. Exit codes: 0 done, 1 the model could not be loaded, 2 bad input.
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
import threading
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from trainer_core.fieldmeta import base_type
from trainer_core.refusals import explain
from trainer_core.request.model import DEFAULT_MODEL
from trainer_core.serving.choices import base_choice, weights_choice
from trainer_core.serving.errors import ChatInputError
from trainer_core.serving.schemas import BASE_MODEL_ID, ChatMessage, GenerationSettings, ModelChoice
from trainer_core.settings import get_settings
from trainer_core.training.checkpoints import CHECKPOINT

SETTINGS = GenerationSettings.model_fields


def add_parser(sub: Any) -> None:
    """Register the ``chat`` sub-command on ``sub`` (argparse sub-parsers)."""
    chat = sub.add_parser("chat", help="Talk to a trained run, one of its checkpoints or the base model.")
    chat.add_argument("run", metavar="RUN", help="A run's output folder, RUN_FOLDER/checkpoint-N, or 'base'.")
    chat.add_argument("--prompt", help="Print the answer to this message and exit (no interactive chat).")
    chat.add_argument("--system", help="System prompt (default: the chat template's own).")
    chat.add_argument(
        "--base-model", default=DEFAULT_MODEL, help=f"With RUN=base: the model (default: {DEFAULT_MODEL})."
    )
    for name, info in SETTINGS.items():
        help_text = f"{info.description} (default: {info.default})".replace("%", "%%")
        chat.add_argument("--" + name.replace("_", "-"), type=base_type(info.annotation), default=None, help=help_text)


def choice_for(run: str, base_model: str = DEFAULT_MODEL) -> ModelChoice:
    """The choice for RUN: ``base``, a run folder (its final weights) or a checkpoint folder. The
    run's base model comes from its ``request.json``. Raises ChatInputError naming the problem."""
    if run == BASE_MODEL_ID:
        return base_choice(base_model)
    folder = Path(run).expanduser().resolve()
    if not folder.is_dir():
        raise ChatInputError(
            f"RUN: {run} is not a folder; give a run's output folder, RUN_FOLDER/checkpoint-N or 'base'"
        )
    checkpoint = CHECKPOINT.match(folder.name) is not None
    run_folder = folder.parent if checkpoint else folder
    try:
        model = json.loads((run_folder / "request.json").read_text(encoding="utf-8")).get("model_name")
    except (OSError, ValueError, AttributeError):
        model = None
    try:
        return weights_choice(
            folder, "checkpoint" if checkpoint else "final", folder.name, model, get_settings().models_dir
        )
    except ChatInputError as exc:
        saved = sorted(p.name for p in folder.glob("checkpoint-*") if CHECKPOINT.match(p.name))
        hint = f"; its checkpoints: {', '.join(saved)}" if saved and not checkpoint else ""
        raise ChatInputError(f"{exc}{hint}") from None


def settings_from(args: argparse.Namespace) -> GenerationSettings:
    """The generation flags given -> settings (schema defaults for the rest)."""
    return GenerationSettings(**{name: getattr(args, name) for name in SETTINGS if getattr(args, name) is not None})


def _answer(loaded: Any, messages: list[ChatMessage], settings: GenerationSettings) -> str:
    """Stream one answer to stdout; Ctrl-C stops it (the partial answer is kept)."""
    from trainer_core.serving.generate import generate

    stop = threading.Event()
    previous = signal.signal(signal.SIGINT, lambda *_: stop.set())
    try:
        finish = generate(
            loaded,
            [m.model_dump() for m in messages],
            settings,
            on_text=lambda text: (sys.stdout.write(text), sys.stdout.flush()),
            should_stop=stop.is_set,
        )
    finally:
        signal.signal(signal.SIGINT, previous)
    print(" [stopped]" if finish.reason == "cancelled" else "", flush=True)
    if finish.reason == "length":
        print(f"(max_new_tokens={settings.max_new_tokens} reached)", file=sys.stderr)
    return finish.text


def _interactive(loaded: Any, system: list[ChatMessage], settings: GenerationSettings) -> int:
    history: list[ChatMessage] = []
    print("Type a message; /clear starts over, /exit ends.", file=sys.stderr)
    while True:
        try:
            text = input("you> ").strip()
        except (EOFError, KeyboardInterrupt):
            print(file=sys.stderr)
            return 0
        if text == "/exit":
            return 0
        if text == "/clear":
            history = []
            print("(cleared)", file=sys.stderr)
            continue
        if not text:
            continue
        history.append(ChatMessage(role="user", content=text))
        try:
            answer = _answer(loaded, system + history, settings)
        except ChatInputError as exc:
            history.pop()
            print(f"error: {exc}", file=sys.stderr)
            continue
        history.append(ChatMessage(role="assistant", content=answer))


def run(args: argparse.Namespace) -> int:
    """The ``chat`` command; returns the exit code."""
    from trainer_core.models.loading import ModelLoadError
    from trainer_core.serving.loader import load_choice
    from trainer_core.serving.worker import quiet_libraries

    try:
        settings = settings_from(args)
        system = [ChatMessage(role="system", content=args.system)] if args.system else []
        prompt = [ChatMessage(role="user", content=args.prompt)] if args.prompt is not None else []
        choice = choice_for(args.run, args.base_model)
    except ValidationError as exc:
        print(f"error: {explain(exc)}", file=sys.stderr)
        return 2
    except ChatInputError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    quiet_libraries()
    print(f"Loading {choice.id} ({choice.base_model}{', adapter' if choice.adapter else ''})...", file=sys.stderr)
    try:
        loaded = load_choice(choice, get_settings().models_dir)
    except ModelLoadError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    print(f"Loaded in {loaded.load_seconds:.1f} s on {loaded.device}.", file=sys.stderr)
    if not prompt:
        return _interactive(loaded, system, settings)
    try:
        _answer(loaded, system + prompt, settings)
    except ChatInputError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0
