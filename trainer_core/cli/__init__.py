"""The headless face: ``python -m trainer_core train / check / chat / evaluate / export``."""

from trainer_core.cli.main import build_parser, main
from trainer_core.cli.train import checked_args, request_from_args

__all__ = ["build_parser", "checked_args", "main", "request_from_args"]
