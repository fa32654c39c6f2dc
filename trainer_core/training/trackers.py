"""Prepare the trackers a run reports to (``TrainingStartRequest.report_to``) inside the worker.

transformers' own integrations do the logging (``report_to`` in ``SFTConfig``); this module only
points each one at the run folder, through the environment variables they read, before the
trainer (and so the tracker package) is created:

- ``tensorboard``: ``TENSORBOARD_LOGGING_DIR`` = ``<run>/tensorboard`` (transformers 5 dropped
  ``TrainingArguments.logging_dir``; ``TensorBoardCallback`` reads this variable);
- ``trackio``: ``TRACKIO_DIR`` = ``<run>/trackio`` (trackio reads it once, at import), project
  ``TRACKER_PROJECT``, run name = the job id;
- ``wandb``: ``WANDB_DIR`` = the run folder (wandb writes ``<run>/wandb/``), ``WANDB_PROJECT``
  ``TRACKER_PROJECT`` unless set, and ``WANDB_MODE=offline`` when wandb's server cannot be reached
  (unless ``WANDB_MODE`` is already set), which ``prepare_trackers`` reports as a notice;
- ``mlflow``: ``MLFLOW_TRACKING_URI`` = ``file:<run>/mlruns`` unless set.

Only the worker process calls ``prepare_trackers`` (it changes ``os.environ``); the app process
never does. Secrets in the environment (``WANDB_API_KEY``, ...) are never read or written here.
"""

from __future__ import annotations

import importlib.util
import logging
import os
import socket
import sys
import threading
from collections.abc import Callable, MutableMapping, Sequence
from pathlib import Path
from typing import Optional
from urllib.parse import urlparse

log = logging.getLogger(__name__)

TRACKER_PROJECT = "finetune-studio"
WANDB_HOST = "api.wandb.ai"
NETWORK_TIMEOUT_S = 2.0
# report_to name -> (module to import, pip package); transformers' names are ours.
PACKAGES = {
    "tensorboard": ("tensorboard", "tensorboard"),
    "trackio": ("trackio", "trackio"),
    "wandb": ("wandb", "wandb"),
    "mlflow": ("mlflow", "mlflow"),
}


def missing_trackers(report_to: Sequence[str]) -> list[str]:
    """The trackers in ``report_to`` whose package cannot be imported here (``importlib.util.find_spec``;
    nothing is imported), in the order given."""
    return [name for name in dict.fromkeys(report_to) if importlib.util.find_spec(PACKAGES[name][0]) is None]


def install_hint(name: str) -> str:
    """The pip command that installs tracker ``name``'s package, e.g. ``pip install wandb``."""
    return f"pip install {PACKAGES[name][1]}"


def host_reachable(host: str, port: int = 443, timeout_s: float = NETWORK_TIMEOUT_S) -> bool:
    """Whether a TCP connection to ``host:port`` opens within ``timeout_s`` seconds (name lookup
    included: it runs in a daemon thread that is abandoned when the time is up)."""
    result: list[bool] = []

    def connect() -> None:
        try:
            socket.create_connection((host, port), timeout=timeout_s).close()
            result.append(True)
        except OSError:
            result.append(False)

    thread = threading.Thread(target=connect, name="tracker-network-check", daemon=True)
    thread.start()
    thread.join(timeout_s)
    return bool(result and result[0])


def wandb_host(env: MutableMapping[str, str]) -> tuple[str, int]:
    """The (host, port) wandb talks to: ``WANDB_BASE_URL``'s when set, else api.wandb.ai:443."""
    url = urlparse(env.get("WANDB_BASE_URL") or "")
    if url.hostname:
        return url.hostname, url.port or (80 if url.scheme == "http" else 443)
    return WANDB_HOST, 443


def tracker_env(
    report_to: Sequence[str],
    run_dir: Path,
    env: MutableMapping[str, str],
    reachable: Callable[[str, int], bool] = host_reachable,
    tensorboard_dir: Optional[Path] = None,
    wandb_project: Optional[str] = None,
) -> tuple[dict[str, str], list[str]]:
    """The environment variables to set for ``report_to`` with run folder ``run_dir`` (values the
    user already set in ``env`` are kept, except the folders of tensorboard and trackio, which
    always go inside the run folder), and the notices to show the user (e.g. wandb going offline).
    ``reachable(host, port)`` is the network check (used only for wandb without ``WANDB_MODE``).
    The request's own ``tensorboard_dir`` (checked at Start like ``output_dir`` and claimed by the
    run when it lies outside the run folder: ``runs.write_folders``) and ``wandb_project`` win over
    the defaults and the environment."""
    run_dir = Path(run_dir).resolve()
    chosen: dict[str, str] = {}
    notices: list[str] = []
    if "tensorboard" in report_to:
        chosen["TENSORBOARD_LOGGING_DIR"] = str(tensorboard_dir or run_dir / "tensorboard")
    if "trackio" in report_to:
        chosen["TRACKIO_DIR"] = str(run_dir / "trackio")
    if "wandb" in report_to:
        chosen["WANDB_DIR"] = str(run_dir)
        if wandb_project or not env.get("WANDB_PROJECT"):
            chosen["WANDB_PROJECT"] = wandb_project or TRACKER_PROJECT
        if not env.get("WANDB_MODE"):
            host, port = wandb_host(env)
            if not reachable(host, port):
                chosen["WANDB_MODE"] = "offline"
                notices.append(
                    f"wandb: {host} cannot be reached, so wandb logs offline into {run_dir / 'wandb'}; "
                    f"upload it later with `wandb sync {run_dir / 'wandb'}`"
                )
    if "mlflow" in report_to and not env.get("MLFLOW_TRACKING_URI"):
        chosen["MLFLOW_TRACKING_URI"] = f"file:{run_dir / 'mlruns'}"
    return chosen, notices


def prepare_trackers(
    report_to: Sequence[str],
    run_dir: Path,
    env: Optional[MutableMapping[str, str]] = None,
    reachable: Optional[Callable[[str, int], bool]] = None,
    tensorboard_dir: Optional[Path] = None,
    wandb_project: Optional[str] = None,
) -> list[str]:
    """Set ``tracker_env``'s variables in ``env`` (default: this process's ``os.environ``; call it
    in the worker only, before the trainer is built) and log each; returns the notices for the
    user. ``reachable`` defaults to ``host_reachable``; ``tensorboard_dir`` and ``wandb_project``
    as in ``tracker_env``. Nothing is done for an empty ``report_to``."""
    if not report_to:
        return []
    env = os.environ if env is None else env
    chosen, notices = tracker_env(report_to, run_dir, env, reachable or host_reachable, tensorboard_dir, wandb_project)
    env.update(chosen)
    imported = sys.modules.get("trackio.utils")  # trackio reads TRACKIO_DIR once, at import
    if "TRACKIO_DIR" in chosen and imported is not None and str(imported.TRACKIO_DIR) != chosen["TRACKIO_DIR"]:
        log.warning(
            "trackers: trackio was imported before the run, so it logs into %s, not the run folder",
            imported.TRACKIO_DIR,
        )
    for key, value in chosen.items():
        log.info("trackers: %s=%s", key, value)
    for notice in notices:
        log.info("trackers: %s", notice)
    return notices


__all__ = [
    "PACKAGES",
    "TRACKER_PROJECT",
    "host_reachable",
    "install_hint",
    "missing_trackers",
    "prepare_trackers",
    "tracker_env",
    "wandb_host",
]
