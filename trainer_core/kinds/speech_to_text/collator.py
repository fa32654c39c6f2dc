"""Batches of a speech-to-text run: each clip decoded and resampled (``data.audio.read_audio``) and
made into log-mel ``input_features`` by the processor's own feature extractor, each transcript
into decoder inputs and labels after Whisper's decoder prompt.

For a row, ids = prompt + transcript + eos, where the prompt is ``<|startoftranscript|>``
``<|lang|>`` ``<|task|>`` ``<|notimestamps|>`` (``decoder_prompt``). ``decoder_input_ids`` are
ids[:-1] and ``labels`` ids[1:] (the next token at each place), with the prompt's tokens and the
padding set to -100: only the transcript and its eos are scored. (Passing ``decoder_input_ids``
keeps the prompt in the decoder's input: Whisper's own shift of the labels would put pad tokens
where the labels are -100.)

A clip's features are made once and kept (``FeatureCache``, up to ``CACHE_BYTES``) for the epochs
after the first: decoding and the log-mel transform cost as much CPU as a tiny Whisper's step
(``bench/speech.py``), and a script that maps its dataset to features before training pays them once.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any, Optional

import torch

IGNORE = -100
CACHE_BYTES = 512 * 2**20  # features kept for later epochs: Whisper's 30 s window is 0.9 MiB a clip (about 550)


def language_code(language: Optional[str]) -> Optional[str]:
    """Whisper's code of ``language`` (a code such as "en" or a name such as "english", any case);
    None for none. Raises Refusal (field ``language``) for a language Whisper does not know."""
    from transformers.models.whisper.tokenization_whisper import LANGUAGES, TO_LANGUAGE_CODE

    from trainer_core.refusals import Refusal

    if not language:
        return None
    wanted = language.strip().lower()
    code = wanted if wanted in LANGUAGES else TO_LANGUAGE_CODE.get(wanted)
    if code is None:
        raise Refusal(
            f"language {language!r} is not one Whisper knows: give a code such as en, de, fr or a name such as "
            "english (or leave it empty to let the model detect it)",
            fields=("language",),
            code="speech_language_unknown",
        )
    return code


def decoder_prompt(tokenizer: Any, request: Any) -> list[int]:
    """Whisper's decoder prompt ids for ``request``: ``<|startoftranscript|>``, the ``language``'s
    token (none for no language), the ``task``'s (``<|transcribe|>`` / ``<|translate|>``) and
    ``<|notimestamps|>`` unless ``return_timestamps``. ``tokenizer`` is read, not changed. Raises
    Refusal (field ``language``) for a language Whisper or this model's vocabulary lacks."""
    from trainer_core.refusals import Refusal

    code = language_code(getattr(request, "language", None))
    names = ["<|startoftranscript|>", *([f"<|{code}|>"] if code else [])]
    names.append(f"<|{getattr(request, 'task', None) or 'transcribe'}|>")
    if not getattr(request, "return_timestamps", False):
        names.append("<|notimestamps|>")
    ids = tokenizer.convert_tokens_to_ids(names)
    missing = [name for name, found in zip(names, ids) if found is None or found == tokenizer.unk_token_id]
    if missing:
        raise Refusal(
            f"this model's vocabulary has no {', '.join(missing)}: choose a language it was trained on (or leave "
            "language empty)",
            fields=("language", "task"),
            code="speech_prompt_token_missing",
        )
    return list(ids)


def label_rows(tokenizer: Any, prompt: list[int], texts: list[str], max_length: int) -> tuple[list, list]:
    """(decoder inputs, labels) per transcript in ``texts``: ids = prompt + transcript + eos, the
    transcript cut so that the inputs (ids[:-1]) hold at most ``max_length`` tokens; labels ids[1:]
    with the prompt's -100."""
    eos = tokenizer.eos_token_id
    inputs, labels = [], []
    for ids in tokenizer(texts, add_special_tokens=False)["input_ids"]:
        room = max(max_length - len(prompt), 0)
        full = [*prompt, *ids[:room], eos]
        inputs.append(full[:-1])
        labels.append([IGNORE] * (len(prompt) - 1) + full[len(prompt) :])
    return inputs, labels


def _padded(rows: list[list[int]], value: int) -> torch.Tensor:
    """(B, T) long tensor of ``rows`` padded on the right with ``value``."""
    width = max(len(row) for row in rows)
    return torch.tensor([row + [value] * (width - len(row)) for row in rows], dtype=torch.long)


class FeatureCache:
    """Each clip's features (mel bins, frames) by its reference, the least recently used dropped once
    they (and their references) pass ``budget`` bytes; a clip bigger than the budget is not kept."""

    def __init__(self, budget: int = CACHE_BYTES) -> None:
        self.budget, self.used = budget, 0
        self.items: OrderedDict[str, torch.Tensor] = OrderedDict()

    @staticmethod
    def size(reference: str, features: torch.Tensor) -> int:
        return features.element_size() * features.nelement() + len(reference)

    def get(self, reference: str) -> Optional[torch.Tensor]:
        found = self.items.get(reference)
        if found is not None:
            self.items.move_to_end(reference)
        return found

    def put(self, reference: str, features: torch.Tensor) -> None:
        size = self.size(reference, features)
        if reference in self.items or size > self.budget:
            return
        self.items[reference] = features
        self.used += size
        while self.used > self.budget:
            old, dropped = self.items.popitem(last=False)
            self.used -= self.size(old, dropped)


class SpeechCollator:
    """Rows ``{"audio": reference, "text": transcript, ...}`` -> ``input_features`` (B, mel bins,
    frames), ``decoder_input_ids`` (B, T) and ``labels`` (B, T; -100 outside the transcript and its
    eos). ``max_length``: decoder tokens a row keeps; ``max_seconds``: the longest clip read.
    Raises DatasetError (from ``read_audio``'s RowError) naming the clip."""

    def __init__(self, processor: Any, request: Any, max_length: int, max_seconds: Optional[float] = None) -> None:
        self.processor = processor
        self.prompt = decoder_prompt(processor.tokenizer, request)
        self.max_length = max_length
        self.max_seconds = max_seconds
        self.dtype: Optional[torch.dtype] = None  # the features' dtype: the model's (bf16 weights take bf16)
        self.cache = FeatureCache()

    def audio(self, rows: list[dict]) -> list[Any]:
        """The rows' clips as mono float32 arrays at the feature extractor's sampling rate."""
        from trainer_core.data.audio import read_audio
        from trainer_core.data.errors import DatasetError, RowError

        rate = self.processor.feature_extractor.sampling_rate
        clips = []
        for row in rows:
            try:
                clips.append(read_audio(row["audio"], sampling_rate=rate, max_seconds=self.max_seconds))
            except RowError as exc:
                raise DatasetError(str(exc), fields=("local_datasets",), code="audio_unreadable") from None
        return clips

    def features(self, clips: list[Any]) -> torch.Tensor:
        """(B, mel bins, frames) float32 log-mel features of ``clips`` (each padded to the extractor's 30 s)."""
        extractor = self.processor.feature_extractor
        return extractor(clips, sampling_rate=extractor.sampling_rate, return_tensors="pt").input_features

    def row_features(self, rows: list[dict]) -> torch.Tensor:
        """(B, mel bins, frames) features of the rows' clips in ``self.dtype``: the cache's, the
        others read and made (``audio``, ``features``) and kept. Raises DatasetError as ``audio``."""
        found = {row["audio"]: self.cache.get(row["audio"]) for row in rows}
        missing = [{"audio": reference} for reference, features in found.items() if features is None]
        if missing:
            for row, features in zip(missing, self.features(self.audio(missing))):
                found[row["audio"]] = features
                self.cache.put(row["audio"], features)
        batch = torch.stack([found[row["audio"]] for row in rows])
        return batch.to(self.dtype) if self.dtype is not None else batch

    def __call__(self, rows: list[dict]) -> dict[str, torch.Tensor]:
        tokenizer = self.processor.tokenizer
        inputs, labels = label_rows(tokenizer, self.prompt, [row["text"] for row in rows], self.max_length)
        return {
            "input_features": self.row_features(rows),
            "decoder_input_ids": _padded(inputs, tokenizer.pad_token_id),
            "labels": _padded(labels, IGNORE),
        }
