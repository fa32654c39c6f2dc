"""The CSM processor after a batch (``collator.TtsCollator``): the tokenizer's backend padding the
processor switched on is off again, so a processor saved after training writes no padding into
``tokenizer.json``; and a folder saved with it (before this was so) still makes batches once loaded
by ``serve.load_processor`` (huggingface/transformers#41598: its ``pad_to_multiple_of`` reaching the
Encodec feature extractor)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from trainer_core.kinds.text_to_speech.collator import TtsCollator
from trainer_core.kinds.text_to_speech.serve import load_processor

ROW = {"audio": np.zeros(2400, dtype=np.float32), "text": "Hi.", "speaker": 0}  # 0.1 s at 24 kHz


def test_a_batch_leaves_no_padding_behind_and_a_padded_folder_still_collates(tiny_csm_dir, tmp_path):
    from transformers import AutoProcessor

    processor = load_processor(tiny_csm_dir)
    batch = TtsCollator(processor)([ROW, {**ROW, "text": "A longer line."}])
    assert batch["input_ids"].shape[0] == 2 and processor.tokenizer.backend_tokenizer.padding is None
    processor.save_pretrained(tmp_path / "clean")
    assert json.loads((tmp_path / "clean" / "tokenizer.json").read_text())["padding"] is None
    processor.tokenizer.backend_tokenizer.enable_padding(pad_id=processor.tokenizer.pad_token_id)
    processor.save_pretrained(tmp_path / "padded")  # as a run's final save did before
    with pytest.raises(TypeError, match="pad_to_multiple_of"):  # the upstream failure this guards against
        TtsCollator(AutoProcessor.from_pretrained(tmp_path / "padded"))([ROW])
    assert TtsCollator(load_processor(tmp_path / "padded"))([ROW])["input_values"].shape[0] == 1
