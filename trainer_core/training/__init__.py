"""The training process: trainer, attention, checkpoints, the worker entry point."""
