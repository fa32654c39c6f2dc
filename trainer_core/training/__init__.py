"""The training process: trainer, attention, checkpoints, run.json, the worker and rank entry points."""
