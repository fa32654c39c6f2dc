"""Export of an Orpheus-style run (``OrpheusKind.exporter``): the text path's exports of a Llama
(``export.worker.exporter``: the adapter zip; merged, checked by answering the check prompts as the
run does; GGUF through llama.cpp's converter, checked in llama.cpp), each card with a section on
speaking (``speech_section``): the model says SNAC codes, which only the codec the run was trained
with (named there, from the run's tokenizer: ``codec.CODEC_KEY``) turns into 24 kHz audio, outside
transformers' ``generate`` and outside llama.cpp. Measured on the tiny model: the GGUF check passed
(3/3 prompts, 60/60 tokens equal in llama.cpp), so GGUF is allowed, with that note."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from trainer_core.export import job as jobs
from trainer_core.export.schemas import ExportResult
from trainer_core.kinds.orpheus.codec import CODEC_KEY
from trainer_core.request.audio import SNAC_24KHZ


def run_codec(choice: Any) -> str:
    """The codec the run of ``choice`` was trained with (its tokenizer's config, or its run
    folder's for a checkpoint); the default SNAC where none is named."""
    folders = [Path(choice.path), Path(choice.path).parent] if choice.path else []
    for folder in folders:
        try:
            found = json.loads((folder / "tokenizer_config.json").read_text(encoding="utf-8")).get(CODEC_KEY)
        except (OSError, ValueError, AttributeError):
            continue
        if isinstance(found, str) and found:
            return found
    return SNAC_24KHZ


def speech_section(codec: str, fmt: str) -> list[str]:
    """The card's lines on how this model speaks (Markdown)."""
    where = {
        "gguf": "llama.cpp runs the language model only: read the tokens it says and decode them with SNAC",
        "adapter": "load it on its base as the usage above shows",
    }.get(fmt.split("-")[0], "load it as the usage above shows")
    return [
        "## Speech (Orpheus-style, SNAC codec)",
        "",
        f"This model says SNAC audio codes as `<custom_token_N>` tokens; the codec `{codec}` (the `snac` package, "
        f"`SNAC.from_pretrained`) turns them into 24 kHz audio. Prompt it with `<custom_token_3>` + the text "
        "(`speaker: text` for a named voice) + the end of text + `<custom_token_4><custom_token_5><custom_token_1>`, "
        "and read what it says until `<custom_token_2>`: 7 tokens a frame, token p of a frame minus "
        "`<custom_token_10>` and p x 4096 is a code of SNAC level 0, 1, 2, 2, 1, 2, 2 (in that order). "
        f"To speak, {where}.",
        "",
    ]


def with_speech(export: Callable[[jobs.ExportJob], ExportResult]) -> Callable[[jobs.ExportJob], ExportResult]:
    """``export`` (a text path's exporter) whose card gains ``speech_section``."""

    def run(job: jobs.ExportJob) -> ExportResult:
        result = export(job)
        card = job.out / "README.md"
        if card.is_file():
            lines = speech_section(run_codec(job.choice), job.request.format)
            card.write_text(card.read_text(encoding="utf-8").rstrip("\n") + "\n\n" + "\n".join(lines), encoding="utf-8")
            files = jobs.listing(job.out)
            result = result.model_copy(update={"files": files, "size_bytes": sum(f.size_bytes for f in files)})
        return result

    return run
