"""Batches of a text-to-speech (CSM) run, made by the processor itself: each row a one-turn
conversation ``{"role": "<speaker>", "content": [text, audio]}`` rendered by the model's chat
template (``<|begin_of_text|>[speaker]text<|end_of_text|><|AUDIO|><|audio_eos|>``), each clip
decoded and resampled to the codec's rate (``data.audio.read_audio``), and
``processor(text=..., audio=..., output_labels=True)``: the ``<|AUDIO|>`` marker widened to one
position a codec frame, ``input_values`` the padded clips (B, 1, samples) with their
``input_values_cutoffs``, and ``labels`` (B, T) the frames and the audio's end (-100 elsewhere).
The model encodes the target clips with its frozen Mimi codec inside ``forward`` and scores every
codebook of every frame (the backbone the first, the depth decoder the rest).

The processor pads the text by switching padding on in the tokenizer's backend, and leaves it on: a
processor saved after that writes the padding into ``tokenizer.json``, and loaded back, its
``pad_to_multiple_of`` reaches ``EncodecFeatureExtractor``, which refuses it (transformers issue
41598). ``forget_padding`` undoes it: after every batch here, and on loading (a folder saved before).
"""

from __future__ import annotations

from typing import Any, Optional

import torch


def conversation(text: str, speaker: int, audio: bool = True) -> list[dict]:
    """CSM's conversation of one utterance: speaker ``speaker`` says ``text`` (with its audio part
    for training; without, the prompt that makes the model speak)."""
    content: list[dict] = [{"type": "text", "text": text}]
    if audio:
        content.append({"type": "audio"})
    return [{"role": str(speaker), "content": content}]


def render(processor: Any, text: str, speaker: int, audio: bool = True) -> str:
    """``conversation`` as the model's chat template writes it (a string, not yet tokenized)."""
    return processor.apply_chat_template(conversation(text, speaker, audio), tokenize=False)


def forget_padding(processor: Any) -> Any:
    """``processor`` with its tokenizer's backend padding switched off and the ``pad_to_multiple_of``
    its loading read from ``tokenizer.json`` dropped (see the module docstring); returns it."""
    tokenizer = processor.tokenizer
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is not None and backend.padding is not None:
        backend.no_padding()
    tokenizer.init_kwargs.pop("pad_to_multiple_of", None)
    return processor


class TtsCollator:
    """Rows ``{"audio": reference, "text": str, "speaker": int, ...}`` -> the processor's
    ``input_ids`` / ``attention_mask`` (B, T), ``input_values`` (B, 1, samples),
    ``input_values_cutoffs`` (B, 1) and ``labels`` (B, T). ``max_seconds``: the longest clip read.
    Raises DatasetError (from ``read_audio``'s RowError) naming the clip."""

    def __init__(self, processor: Any, max_seconds: Optional[float] = None) -> None:
        self.processor = processor
        self.max_seconds = max_seconds
        self.dtype: Optional[torch.dtype] = None  # the clips' dtype: the model's (bf16 weights take bf16)

    def audio(self, rows: list[dict]) -> list[Any]:
        """The rows' clips as mono float32 arrays at the codec's sampling rate (a row's ``audio``: a
        reference, or samples already at that rate)."""
        from trainer_core.data.audio import read_audio
        from trainer_core.data.errors import DatasetError, RowError

        rate = self.processor.feature_extractor.sampling_rate
        clips = []
        for row in rows:
            if not isinstance(row["audio"], str):
                clips.append(row["audio"])
                continue
            try:
                clips.append(read_audio(row["audio"], sampling_rate=rate, max_seconds=self.max_seconds))
            except RowError as exc:
                raise DatasetError(str(exc), fields=("local_datasets",), code="audio_unreadable") from None
        return clips

    def __call__(self, rows: list[dict]) -> dict[str, torch.Tensor]:
        texts = [render(self.processor, row["text"], row["speaker"]) for row in rows]
        try:
            batch = dict(self.processor(text=texts, audio=self.audio(rows), output_labels=True))
        finally:
            forget_padding(self.processor)  # the processor as loaded, for the saves after training
        if self.dtype is not None:
            batch["input_values"] = batch["input_values"].to(self.dtype)
        return batch
