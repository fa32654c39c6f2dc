"""Background tasks on a run: export, evaluate, push to the Hub (one at a time, in a worker process)."""
