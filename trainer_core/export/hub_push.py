"""Push a finished export to the Hugging Face Hub: ``run_push(request, context, events, stop)``
(the ``TaskRunner`` target; ``push_export`` does the work and is called by the CLI too).

``request``: ``repo_id`` (owner/name), ``private`` (default True) and ``token`` (None: ``HF_TOKEN``
from the environment). The token is used for these calls only: never logged, never put in an
error message (they are redacted), never stored (``start.start_push`` keeps it out of the stored
request). ``context["export"]`` is the export task's record. One ``create_repo(exist_ok=True)``
and one commit of every file, so the Hub gets all files or none: an adapter export is pushed as the
zip's contents (adapter, tokenizer, README.md; read from the zip in memory), a merged or GGUF
export as its folder's files. Nothing is written locally.

Errors (``HubPushError``, always ``kind`` input): the Hub unreachable ("could not reach
huggingface.co ..."), no token, a token the Hub refuses (401), a repo name owned by someone else or
a namespace the token may not write to (403 / 409), anything else the Hub answers.
"""

from __future__ import annotations

import logging
import os
import zipfile
from pathlib import Path
from typing import Any, Optional

from trainer_core.export.schemas import PushResult
from trainer_core.hub_ids import hub_id_problem
from trainer_core.tasks.schemas import TaskEvent

log = logging.getLogger(__name__)


class HubPushError(RuntimeError):
    """The push did not happen; the message says why and what to do (no token in it)."""


def repo_id_problem(repo_id: str) -> Optional[str]:
    """Why ``repo_id`` is not an ``owner/name`` the Hub accepts, or None."""
    if repo_id.count("/") != 1:
        return f"'{repo_id}' must be owner/name (your user or organisation, then the model's name)"
    return hub_id_problem(repo_id) and f"'{repo_id}' {hub_id_problem(repo_id)}"


def operations(export: dict[str, Any]) -> list[Any]:
    """The commit's file additions for an export task record (see the module docstring)."""
    from huggingface_hub import CommitOperationAdd

    folder = Path(export["output_dir"])
    files = [f["name"] for f in (export.get("result") or {}).get("files", [])]
    ops = []
    for name in files:
        path = folder / name
        if name.endswith(".zip") and (export.get("result") or {}).get("format") == "adapter":
            with zipfile.ZipFile(path) as zf:
                ops += [
                    CommitOperationAdd(member, zf.read(member)) for member in zf.namelist() if not member.endswith("/")
                ]
        else:
            ops.append(CommitOperationAdd(name, str(path)))
    return ops


def redact(text: str, token: Optional[str]) -> str:
    """``text`` with ``token`` replaced by ``***``."""
    return text.replace(token, "***") if token else text


def _network_error(exc: BaseException) -> bool:
    from huggingface_hub.errors import OfflineModeIsEnabled

    names = {cls.__name__ for cls in type(exc).__mro__}
    return isinstance(exc, (OfflineModeIsEnabled, ConnectionError, TimeoutError)) or bool(
        names & {"TransportError", "RequestError", "ConnectError", "TimeoutException", "NetworkError"}
    )


def _explain(exc: BaseException, repo_id: str, host: str) -> str:
    """A Hub failure in words (no token in them)."""
    from huggingface_hub.errors import HfHubHTTPError

    if isinstance(exc, HfHubHTTPError) and exc.response is not None:
        status = exc.response.status_code
        if status == 401:
            return "the Hub refused the token (401): check it, or create one with write access at huggingface.co/settings/tokens"
        if status in (403, 409):
            owner = repo_id.split("/")[0]
            return (
                f"the Hub refused to create or write {repo_id} ({status}): the name belongs to someone else or the "
                f"token may not write to '{owner}'; choose a repo under your own user or organisation, or a "
                "token with write access to it"
            )
        return f"the Hub answered {status} for {repo_id}: {str(exc).splitlines()[0][:300]}"
    if _network_error(exc):
        return f"could not reach {host} ({type(exc).__name__}); check the network (or proxy) and push again; nothing was pushed"
    return f"the push to {repo_id} failed: {type(exc).__name__}: {exc}"


def commit_files(
    request: dict[str, Any], ops: Any, message: str, repo_type: str = "model", say: Any = lambda message: None
) -> tuple[str, bool]:
    """Create ``request["repo_id"]`` (a ``repo_type`` repo, private unless ``request["private"]`` is
    False) and commit ``ops`` (a list, or a callable making it once the Hub answers) in one commit;
    returns (its URL, private). Raises HubPushError (see the module docstring)."""
    from urllib.parse import urlparse

    from huggingface_hub import HfApi, constants

    from trainer_core.models.hub import hub_reachable

    repo_id, private = request["repo_id"], bool(request.get("private", True))
    token = request.get("token") or os.environ.get("HF_TOKEN") or None
    host = urlparse(constants.ENDPOINT).hostname or "huggingface.co"
    if problem := repo_id_problem(repo_id):
        raise HubPushError(f"repo_id: {problem}")
    if not token:
        raise HubPushError("a Hugging Face token with write access is needed: type one for this push or set HF_TOKEN")
    if not hub_reachable():
        raise HubPushError(f"could not reach {host}: check the network (or proxy) and push again; nothing was pushed")
    api = HfApi(token=token)
    try:
        ops = ops() if callable(ops) else ops
        say(f"Creating {repo_id} ({'private' if private else 'public'})")
        url = api.create_repo(repo_id, private=private, exist_ok=True, repo_type=repo_type)
        say(f"Uploading {len(ops)} files to {repo_id}")
        api.create_commit(repo_id, ops, commit_message=message, repo_type=repo_type)
    except Exception as exc:  # noqa: BLE001 - the Hub client raises httpx, OSError and its own errors alike
        raise HubPushError(redact(_explain(exc, repo_id, host), token)) from None
    log.info("pushed %d files to %s (%s)", len(ops), repo_id, repo_type)
    return str(url), private


def push_export(request: dict[str, Any], export: dict[str, Any], say: Any = lambda message: None) -> PushResult:
    """Create the repo and commit the export's files. Raises HubPushError."""
    ops: list[Any] = []

    def made() -> list[Any]:
        ops.extend(operations(export))
        return ops

    message = f"Export {export.get('model')} ({(export.get('result') or {}).get('format')}) from Finetune Studio"
    url, private = commit_files(request, made, message, "model", say)
    return PushResult(repo_id=request["repo_id"], url=url, private=private, files=[op.path_in_repo for op in ops])


def run_push(request: dict[str, Any], context: dict[str, Any], events: Any, stop: Any) -> None:
    """Process entry point. Never raises; one ``result`` (``PushResult``) or ``error`` event."""
    from trainer_core.process.parent import exit_with_parent

    exit_with_parent()
    token = request.get("token") or os.environ.get("HF_TOKEN")

    def say(message: str) -> None:
        events.put((TaskEvent.PROGRESS, {"fraction": 0.1, "message": message}))

    try:
        result = push_export(request, context["export"], say)
    except HubPushError as exc:
        events.put((TaskEvent.ERROR, {"message": str(exc), "kind": "input"}))
        return
    except BaseException as exc:  # noqa: BLE001 - the process boundary; the token is redacted
        events.put(
            (
                TaskEvent.ERROR,
                {"message": redact(f"the push failed: {type(exc).__name__}: {exc}", token), "kind": "internal"},
            )
        )
        return
    events.put((TaskEvent.RESULT, result.model_dump()))
