"""(audio, transcript) files for the speech-to-text tests: the shared demo clips (mp3 / wav / flac;
16, 44.1 and 48 kHz; mono and stereo; 2.9-5.9 s) copied beside a JSON file that names them by
relative path, as users bring them."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

CLIPS = Path(__file__).resolve().parents[2].parent / "shared" / "datasets" / "mllm_demo_data"
ROWS = (
    ("1.mp3", "It is the sound of glass shattering."),
    ("2.wav", "A woman is coughing."),
    ("3.flac", "The wind is blowing through the trees."),
    ("4.mp3", "Someone is playing a piano."),
)


def speech_file(folder: Path, rows: tuple = ROWS, name: str = "speech.json", column: str = "text") -> Path:
    """``folder/name``: a JSON list of ``{"audio": <clip file>, <column>: <transcript>}`` for
    ``rows``, with the clips copied into ``folder``. Returns the JSON file's path."""
    folder.mkdir(parents=True, exist_ok=True)
    for clip, _ in rows:
        if (CLIPS / clip).is_file() and not (folder / clip).exists():
            shutil.copy(CLIPS / clip, folder / clip)
    path = folder / name
    path.write_text(json.dumps([{"audio": clip, column: text} for clip, text in rows]), encoding="utf-8")
    return path


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
