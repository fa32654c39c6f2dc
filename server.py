"""Finetune Studio: one FastAPI app serving the Gradio UI at ``/`` and the training API at
``/api/train``, over one single-job runner and one run history. Parse host/port, check access, serve."""

from __future__ import annotations

import argparse
import logging
import os
import secrets
import threading
from functools import partial
from pathlib import Path
from typing import Any, Optional

import gradio as gr
import uvicorn
from fastapi import Depends, FastAPI
from fastapi.openapi.docs import get_swagger_ui_html
from fastapi.responses import HTMLResponse, JSONResponse
from pydantic import ValidationError

from api import arena_routes, data_routes, errors, openai_routes, queue_routes, recipe_routes, task_routes
from api.auth import bearer_vouched, logged_in_user, require_docs_access
from api.page_guard import ApiInfoGuard
from api.throttle import FailureThrottle, ThrottleMiddleware
from api.train_routes import router
from trainer_core.arena.battle import Arena
from trainer_core.arena.store import ArenaStore
from trainer_core.data.preview_tokenizer import local_model_folder
from trainer_core.hosts import is_loopback
from trainer_core.process.parent import exit_normally_on_sigterm
from trainer_core.queue.dispatcher import JobQueue
from trainer_core.queue.store import QueueStore
from trainer_core.request.model import DEFAULT_MODEL
from trainer_core.runs.folders import record_files
from trainer_core.runs.integrity import HistoryUnreadable
from trainer_core.runs.job import JobRunner
from trainer_core.runs.reimport import import_runs
from trainer_core.runs.store import RunStore
from trainer_core.serving.engine import ChatEngine
from trainer_core.settings import Settings, get_settings
from trainer_core.tasks.export_models import ExportModels
from trainer_core.tasks.runner import TaskRunner
from trainer_core.training.checkpoints import latest_checkpoint
from ui import page_assets
from ui.layout import build_ui

log = logging.getLogger("finetune_studio")


def parse_args(argv: Optional[list[str]] = None) -> argparse.Namespace:
    """``--host`` / ``--port`` default to GRADIO_SERVER_NAME / GRADIO_SERVER_PORT, then 127.0.0.1:7860."""
    parser = argparse.ArgumentParser(description="Finetune Studio web app")
    parser.add_argument("--host", default=os.environ.get("GRADIO_SERVER_NAME", "127.0.0.1"))
    parser.add_argument("--port", type=int, default=int(os.environ.get("GRADIO_SERVER_PORT", "7860")))
    parser.add_argument("--share", action="store_true", help="Open a public Gradio share link.")
    parser.add_argument("--insecure", action="store_true", help="Serve publicly without credentials (not advised).")
    return parser.parse_args(argv)


def access_problem(host: str, share: bool, insecure: bool, settings: Settings) -> Optional[str]:
    """Why serving publicly is refused (None when allowed): a share link or a non-loopback host
    needs both a UI login and an API token, unless ``--insecure`` / STUDIO_INSECURE."""
    if insecure or settings.insecure or (not share and is_loopback(host)):
        return None
    missing = [
        name
        for name, ok in (
            ("STUDIO_USERNAME and STUDIO_PASSWORD", settings.login_enabled),
            ("STUDIO_API_TOKEN", settings.api_token is not None),
        )
        if not ok
    ]
    if not missing:
        return None
    where = "a share link" if share else f"host {host}"
    return (
        f"refusing to serve on {where} without credentials: set {' and '.join(missing)}, "
        "or pass --insecure to serve anyway"
    )


def open_history(settings: Settings) -> RunStore:
    """The run history, with runs an earlier process left live marked ``interrupted`` (and their
    newest checkpoint recorded, so they can be resumed). A new history (first start, or a damaged
    one moved aside) re-imports the runs folder's runs from their ``run.json`` files
    (``runs.reimport``). Raises ``HistoryUnreadable`` for a damaged file (left untouched)."""
    store = RunStore(settings.db_path)
    if store.created:
        import_runs(store, settings.runs_dir)
    for run in store.mark_interrupted():
        checkpoint = latest_checkpoint(Path(run.output_dir))
        store.set_checkpoint(run.job_id, str(checkpoint) if checkpoint else None)
        try:
            record_files(Path(run.output_dir), run.job_id)  # what Delete may remove
        except OSError:
            log.exception("could not record the files of %s", run.job_id)
        log.info("run %s was interrupted; last checkpoint %s", run.job_id, checkpoint)
    return store


QUEUE_IDLE_POLL_S = 0.05  # Gradio's own value on Windows; 0.001 elsewhere
QUEUE_PROGRESS_POLL_S = 0.1  # likewise; 0.01 elsewhere (we send no gr.Progress updates)


def quiet_queue(demo: gr.Blocks) -> gr.Blocks:
    """Make Gradio's queue poll at 20 Hz / 10 Hz instead of 1 kHz / 100 Hz. Its busy-wait cost an
    idle app 9 % of a core, and that CPU came out of training on a 2-core machine
    (bench/ui_overhead.py). Events now start up to 50 ms later. These attributes are private in
    Gradio 6.31; tests/test_server.py fails if a Gradio upgrade renames them."""
    queue = demo._queue
    queue.sleep_when_free = QUEUE_IDLE_POLL_S
    queue.progress_update_sleep_when_free = QUEUE_PROGRESS_POLL_S
    return demo


def build_app(settings: Optional[Settings] = None, runner: Optional[JobRunner] = None) -> FastAPI:
    """The FastAPI app: API routes, then the UI mounted at ``/`` (with a login when configured).
    Runs left live by an earlier process are marked ``interrupted``; the job queue's dispatcher
    starts (``app.state.queue``) and runs what an earlier process left waiting."""
    settings = settings or get_settings()
    if runner is None:
        runner = JobRunner(runs_dir=settings.runs_dir, store=open_history(settings))
    app = FastAPI(
        title="Finetune Studio",
        description="Fine-tune language models; watch training live.",
        docs_url=None,
        redoc_url=None,
        openapi_url=None,
    )
    app.state.settings, app.state.runner = settings, runner
    errors.install(app)
    app.add_middleware(
        ThrottleMiddleware,
        throttle=FailureThrottle(settings.login_attempts_per_minute),
        vouched=partial(bearer_vouched, settings),
    )
    auth = ui_auth(settings)
    early = page_assets.EARLY_SCRIPT.encode("utf-8")
    if auth is not None:
        app.add_middleware(
            ApiInfoGuard, is_logged_in=lambda request: logged_in_user(request) is not None, head_script=early
        )
    else:
        app.add_middleware(ApiInfoGuard, is_logged_in=lambda request: True, head_script=early)
    app.include_router(router)
    tasks = TaskRunner(runner, settings)  # export / evaluate / push; a Start is refused while one runs
    engine = ChatEngine(
        runner, settings, models=ExportModels(tasks.store, runner.store, settings)
    )  # + GGUF and merged exports
    runner.before_start = engine.unload  # training has the machine: Start unloads the chat model first
    tasks.store.mark_interrupted()
    tasks.before_task = engine.unload
    app.state.tasks = tasks
    app.include_router(task_routes.router)
    app.include_router(task_routes.files_router)
    queue = JobQueue(runner, settings, QueueStore(runner.store.path if runner.store else settings.db_path)).start()
    app.state.queue = queue
    app.include_router(queue_routes.router)
    app.include_router(recipe_routes.router)
    openai_routes.install(app, engine)  # /v1 and share links; before the UI's mount at /
    arena = Arena(engine, ArenaStore(runner.store.path if runner.store else settings.db_path))
    app.state.arena = arena
    app.include_router(arena_routes.router)
    app.include_router(data_routes.router)
    _api_description(app)
    demo = quiet_queue(build_ui(runner, settings, engine, tasks, queue, arena).queue(default_concurrency_limit=None))
    app = gr.mount_gradio_app(
        app,
        demo,
        path="/",
        auth=auth,
        allowed_paths=[str(settings.uploads_dir)],
        css=page_assets.CSS,
        head=page_assets.SCRIPT,
    )
    # Gradio checks that a file value sent to an event is one it received as an upload only once
    # the Blocks "has launched", which mounted Blocks never do: without this, a raw queue call could
    # have any server file copied into Gradio's cache and served back. Our handlers check again
    # (ui/uploads.py).
    demo.has_launched = True
    app.state.gradio_app = next(route.app for route in app.routes if getattr(route, "path", None) == "")
    errors.install(app.state.gradio_app)  # Gradio's own 422s would echo an event's data (a token)
    return app


def ui_auth(settings: Settings) -> Any:
    """Gradio's ``auth`` for the page: the login when one is set; with only an API token, any user
    name and the token as password (so the page is never open while the API is guarded); None
    when neither is set."""
    if settings.login_enabled:
        return settings.username, settings.password.get_secret_value()
    if settings.api_token is not None:
        token = settings.api_token.get_secret_value().encode()
        return lambda username, password: secrets.compare_digest(str(password).encode(), token)
    return None


def _api_description(app: FastAPI) -> None:
    """``/openapi.json`` and ``/docs``, behind the login or the token when either is configured."""
    guard = [Depends(require_docs_access)]

    @app.get("/openapi.json", include_in_schema=False, dependencies=guard)
    def openapi() -> JSONResponse:
        return JSONResponse(app.openapi())

    @app.get("/docs", include_in_schema=False, dependencies=guard)
    def docs() -> HTMLResponse:
        return get_swagger_ui_html(openapi_url="/openapi.json", title="Finetune Studio API")


def _open_share_link(host: str, port: int) -> None:
    import secrets

    from gradio import networking

    url = networking.setup_tunnel(
        host if host != "0.0.0.0" else "127.0.0.1", port, secrets.token_urlsafe(32), None, None
    )
    log.info("public share link: %s", url)


def main(argv: Optional[list[str]] = None) -> None:
    """Parse the command line, refuse unsafe public serving, and serve until interrupted."""
    args = parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        settings = get_settings()
    except ValidationError as exc:  # the message only: pydantic's text would echo the secret
        raise SystemExit("error: " + "; ".join(e["msg"].removeprefix("Value error, ") for e in exc.errors())) from None
    problem = access_problem(args.host, args.share, args.insecure, settings)
    if problem:
        raise SystemExit(f"error: {problem}")
    # Gradio keeps uploads in one folder per process; inside our uploads folder it holds only what
    # this server received (the shared /tmp/gradio may hold other apps' files).
    os.environ.setdefault("GRADIO_TEMP_DIR", str((settings.uploads_dir / ".gradio").resolve()))
    try:
        app = build_app()
    except HistoryUnreadable as exc:  # the file named, left as it is, the way back said; no traceback
        raise SystemExit(f"error: {exc}") from None
    # A fresh install: the default model's tokenizer is read from the bundled GGUF now (about 10 s,
    # once), so the first dataset check does not wait for it (data.preview_tokenizer).
    threading.Thread(target=local_model_folder, args=(DEFAULT_MODEL, settings), daemon=True, name="tokenizer").start()
    if args.share:
        threading.Timer(2.0, _open_share_link, args=(args.host, args.port)).start()
    log.info("serving on http://%s:%d", args.host, args.port)
    exit_normally_on_sigterm()  # workers asked to end, semaphores unlinked: no resource_tracker warnings
    # Client addresses (for the login throttle) come from the socket unless a proxy is trusted:
    # X-Forwarded-For from anyone else would let a guesser pick a new address for each try.
    uvicorn.run(
        app,
        host=args.host,
        port=args.port,
        log_level="warning",
        proxy_headers=settings.trust_proxy_headers,
        forwarded_allow_ips=settings.forwarded_allow_ips,
    )


if __name__ == "__main__":
    main()
