"""Unit tests of ``trainer_core``, one file per module."""
