"""Finetune Studio entry point (``python app.py [--host H] [--port P] [--share] [--insecure]``;
Hugging Face Spaces runs this file). The app itself is in ``server.py``.

This file stays import-free on purpose: training workers are started with multiprocessing's
``spawn``, which re-imports the main module in every worker, and importing Gradio there cost
about 6 s of each Start (bench/latency.py).
"""

if __name__ == "__main__":
    from server import main

    main()
