"""(audio, transcript) files for the speech-to-text tests: the shared demo clips copied beside a JSON
file that names them by relative path, as users bring them (``bench.whisper_model.speech_file``,
whose rows the speed bench trains on too), and a request training on one."""

from __future__ import annotations

from pathlib import Path

from bench.whisper_model import CLIPS, speech_file
from bench.whisper_model import TRANSCRIPTS as ROWS

__all__ = ["CLIPS", "ROWS", "speech_file", "speech_request"]


def speech_request(model: Path, data: Path, **fields):
    """A ``TrainingStartRequest`` training ``model`` on the JSON file ``data`` for a few steps in fp32."""
    from trainer_core.schemas import TrainingStartRequest

    base = dict(
        model_name=str(model),
        local_datasets=[str(data)],
        batch_size=2,
        max_steps=3,
        learning_rate=1e-3,
        mixed_precision="no",
        max_seq_length=64,
    )
    return TrainingStartRequest(**{**base, **fields})
