"""Cheap checks, at Start, that a request's model and Hub dataset can be had, so a wrong name is
refused in about a second instead of after a worker has spent half a minute on it.

A local ``model_name`` must be an absolute (or ``~`` / ``./``) path inside the allowed folders, the
studio's models dir or the Hugging Face cache; anything else is a Hub id. Hub ids are looked up in
the local cache first, then (when the Hub answers) with one metadata call.
"""

from __future__ import annotations

import json
import logging
import socket
import threading
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Optional
from urllib.parse import urlparse

from trainer_core.hub_ids import hub_id_problem
from trainer_core.paths import PathNotAllowed, confine, shown
from trainer_core.refusals import Refusal
from trainer_core.request.model import DEFAULT_MODEL

log = logging.getLogger(__name__)
REACHABLE_TTL_S = 30.0  # how long one "is the Hub reachable?" answer is reused
HUB_CALL_TIMEOUT_S = 10.0


class HubCheckError(Refusal):
    """A model or dataset named in a request cannot be had; the message names the field and the fix."""

    code = "hub_check_failed"


def hub_reachable(timeout_s: float = 3.0) -> bool:
    """True when a TCP connection to the Hugging Face endpoint opens within ``timeout_s`` seconds
    (False at once when ``HF_HUB_OFFLINE`` is set). Avoids huggingface_hub's ~45 s of retries."""
    from huggingface_hub import constants

    if constants.HF_HUB_OFFLINE:
        return False
    url = urlparse(constants.ENDPOINT)
    port = url.port or (443 if url.scheme == "https" else 80)
    try:
        with socket.create_connection((url.hostname, port), timeout=timeout_s):
            return True
    except OSError:
        return False


_reachable: tuple[float, bool] = (0.0, False)
_reachable_lock = threading.Lock()


def hub_reachable_cached() -> bool:
    """``hub_reachable()``, reused for ``REACHABLE_TTL_S`` seconds (it may take 3 s offline)."""
    global _reachable
    with _reachable_lock:
        checked_at, answer = _reachable
        if time.monotonic() - checked_at > REACHABLE_TTL_S:
            answer = hub_reachable()
            _reachable = (time.monotonic(), answer)
        return answer


def looks_like_path(name: str) -> bool:
    """Hub ids are ``name`` or ``owner/name``; a value starting with ``/``, ``.`` or ``~``, or with
    more than one ``/`` or any ``\\``, is meant as a folder."""
    return name.startswith(("/", ".", "~")) or name.count("/") > 1 or "\\" in name


def check_model_name(name: str, roots: Iterable[Path]) -> str:
    """The offline half of ``check_model``, which the pre-flight check shares with Start: a folder
    path resolved and confined to ``roots`` with a ``config.json``, or a well-formed Hub id (no NUL,
    no spaces, ...) returned unchanged. Raises HubCheckError or PathNotAllowed naming model_name."""
    if looks_like_path(name):
        folder = confine(name, roots, "model_name")
        if not (folder / "config.json").is_file():
            raise HubCheckError(
                f"model_name: {shown(name)} is not a saved transformers model folder (no config.json)",
                fields=("model_name",),
            )
        confine_adapter_base(folder, roots)
        return str(folder)
    if problem := hub_id_problem(name):
        raise HubCheckError(
            f"model_name: '{shown(name)}' {problem}, nor a folder path (start folders with / or ./)",
            fields=("model_name",),
        )
    return name


def confine_adapter_base(folder: Path, roots: Iterable[Path]) -> None:
    """A model ``folder`` that holds a LoRA adapter loads its base from ``adapter_config.json``'s
    ``base_model_name_or_path``: where that is a local path it must lie in ``roots`` too (else the
    folder would open a model outside the allowed folders). Raises PathNotAllowed naming model_name;
    an unreadable config is left to the loader's own message."""
    try:
        base = json.loads((folder / "adapter_config.json").read_text(encoding="utf-8")).get("base_model_name_or_path")
    except (OSError, ValueError, AttributeError):
        return
    if isinstance(base, str) and base and (looks_like_path(base) or Path(base).is_absolute()):
        try:
            confine(base, roots, "model_name")
        except PathNotAllowed:
            raise PathNotAllowed(
                f"model_name: {shown(str(folder))} holds an adapter whose base ({shown(base)}, its adapter_config.json's "
                "base_model_name_or_path) is outside the allowed folders: put the base model in one of them",
                fields=("model_name",),
            ) from None


def check_model(name: str, roots: Iterable[Path], token: Optional[str] = None) -> str:
    """The model reference to hand to the worker: a resolved local folder or the Hub id unchanged.

    Raises HubCheckError (or PathNotAllowed, also a ValueError) when a folder lies outside ``roots``
    (without saying whether it exists), has no ``config.json``, or when a Hub id is malformed, not
    on the Hub, or (Hub unreachable) not in the local cache."""
    checked = check_model_name(name, roots)
    if checked != name or looks_like_path(name):
        return checked
    if name == DEFAULT_MODEL or _in_cache(name, "model", token):
        return name
    if not hub_reachable_cached():
        raise HubCheckError(
            f"model_name: {name} is not in the local cache and the Hugging Face Hub cannot be reached; "
            "connect to the internet, or give the path of a model folder",
            fields=("model_name",),
        )
    _exists_on_hub(name, "model", token)
    return name


def check_hub_dataset(name: str, token: Optional[str] = None) -> None:
    """Raise HubCheckError when Hub dataset ``name`` is a local path, or cannot be had (not cached
    and the Hub unreachable, or not on the Hub)."""
    if Path(name).exists() or Path(f"{name}.py").exists():
        raise HubCheckError(
            f"hf_dataset: '{name}' names a local file or folder here; hf_dataset is for Hub ids, "
            "files on the server go in local_datasets",
            fields=("hf_dataset", "local_datasets"),
        )
    if _in_cache(name, "dataset", token):
        return
    if not hub_reachable_cached():
        raise HubCheckError(
            f"hf_dataset: {name} is not in the local cache and the Hugging Face Hub cannot be reached; "
            "connect to the internet, or upload the data as a file",
            fields=("hf_dataset",),
        )
    _exists_on_hub(name, "dataset", token)


def _in_cache(name: str, repo_type: str, token: Optional[str]) -> bool:
    from huggingface_hub import snapshot_download
    from huggingface_hub.errors import LocalEntryNotFoundError

    try:
        snapshot_download(name, repo_type=repo_type, token=token, local_files_only=True)
        return True
    except (LocalEntryNotFoundError, FileNotFoundError, ValueError):
        return False


def _exists_on_hub(name: str, repo_type: str, token: Optional[str]) -> None:
    from huggingface_hub import HfApi
    from huggingface_hub.errors import GatedRepoError, HfHubHTTPError, RepositoryNotFoundError

    field = "model_name" if repo_type == "model" else "hf_dataset"
    try:
        HfApi(token=token).repo_info(name, repo_type=repo_type, timeout=HUB_CALL_TIMEOUT_S)
    except GatedRepoError:
        return  # the worker explains gated repos with the token in hand
    except RepositoryNotFoundError:
        raise HubCheckError(
            f"{field}: {name} was not found on the Hugging Face Hub (or is private: give a Hugging Face token)",
            fields=(field,),
        ) from None
    except HfHubHTTPError as exc:
        code = exc.response.status_code if exc.response is not None else None
        if code in (401, 403):
            raise HubCheckError(
                f"{field}: the Hugging Face Hub refused the token for {name} (HTTP {code}); check the "
                "Hugging Face token",
                fields=(field,),
            ) from None
        log.info("could not confirm %s %s on the Hub (HTTP %s); the worker will try", repo_type, name, code)
    except OSError as exc:  # a timeout or a dropped connection: the worker tries again
        log.info("could not confirm %s %s on the Hub (%s); the worker will try", repo_type, name, type(exc).__name__)


__all__ = [
    "HubCheckError",
    "PathNotAllowed",
    "check_hub_dataset",
    "check_model",
    "hub_reachable_cached",
    "looks_like_path",
]
