"""Finetune Studio entry point (``python app.py [--host H] [--port P] [--share] [--insecure]``, or the
``finetune-studio`` command of the installed package; Hugging Face Spaces runs this file). The app
itself is in ``server.py``.

This file stays import-free on purpose: training workers are started with multiprocessing's
``spawn``, which re-imports the main module (this file, or the console script that imports ``main``
from it) in every worker, and importing Gradio there cost about 6 s of each Start (bench/latency.py).
"""


def main() -> None:
    """Serve the app until interrupted (``server.main``; imported here, not at the top)."""
    from server import main as serve

    serve()


if __name__ == "__main__":
    main()
