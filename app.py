"""Finetune Studio: build the app (UI over the single-job runner) and launch it. No logic here."""

from __future__ import annotations

import argparse
import logging
import os

import gradio as gr

from trainer_core.job import JobRunner
from ui.layout import build_ui


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """``--host`` / ``--port`` default to GRADIO_SERVER_NAME / GRADIO_SERVER_PORT, then 127.0.0.1:7860."""
    parser = argparse.ArgumentParser(description="Finetune Studio web app")
    parser.add_argument("--host", default=os.environ.get("GRADIO_SERVER_NAME", "127.0.0.1"))
    parser.add_argument("--port", type=int, default=int(os.environ.get("GRADIO_SERVER_PORT", "7860")))
    parser.add_argument("--share", action="store_true", help="Open a public Gradio share link.")
    return parser.parse_args(argv)


def build_app(runner: JobRunner | None = None) -> gr.Blocks:
    """The Blocks app with its queue configured; one runner per process, shared by all visitors."""
    demo = build_ui(runner or JobRunner())
    return demo.queue(default_concurrency_limit=None)


def main(argv: list[str] | None = None) -> None:
    """Parse the command line and serve until interrupted."""
    args = parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    build_app().launch(server_name=args.host, server_port=args.port, share=args.share)


if __name__ == "__main__":
    main()
