"""The SNAC codec of an Orpheus-style model (the ``snac`` package): where its weights are (the
request's ``audio_codec``: a local folder confined to the allowed folders, or a Hub id found in the
local Hub cache, never downloaded), loading it, a clip's codes (3 levels: (F,), (2F,), (4F,) for F
frames) and the audio of codes.

A frame is what one ``l0`` code covers: ``hop_length * vq_strides[0]`` samples (SNAC 24 kHz: 512 x 4
= 2048 samples, 85.3 ms); ``encode`` pads a clip on the right to whole frames, and ``decode`` of F
frames says ``F * samples_per_frame`` samples.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any, Optional

from trainer_core.kinds.orpheus.family import CODEBOOK_SIZE, TTS_EXAMPLE
from trainer_core.refusals import Refusal

CODEC_FILES = ("config.json", "pytorch_model.bin")  # SNAC.from_pretrained's folder layout
LEVELS = 3  # SNAC 24 kHz: codes at 1, 2 and 4 per frame (vq_strides 4, 2, 1)
FIELD = "audio_codec"
CODEC_KEY = "audio_codec"  # a run's codec, saved in its tokenizer's config (tokenizer_config.json)


class CodecMissing(Refusal):
    """The request's ``audio_codec`` is not on this machine (or not a 24 kHz-style SNAC)."""

    code = "tts_codec_missing"


def _missing(name: str, where: str) -> CodecMissing:
    return CodecMissing(
        f"{FIELD}: {name}: {where}. An Orpheus-style text-to-speech model speaks SNAC codes, which only the SNAC "
        f"codec's weights turn into audio (and its training targets are clips encoded with it): put the codec's "
        f"folder ({', '.join(CODEC_FILES)}) in the allowed folders and name it in {FIELD}, or fetch it into the Hub "
        f"cache (huggingface-cli download {name}); or train Sesame CSM instead",
        fields=(FIELD, "model_name"),
    )


def codec_folder(name: str) -> Path:
    """The folder holding the codec ``name``: a path (a door's admission confined it to the allowed
    folders: ``admission.request_paths``) or a Hub id (its files in the local Hub cache). Raises
    CodecMissing naming where it looked."""
    from trainer_core.models.hub import looks_like_path

    if looks_like_path(name):
        folder = Path(name).expanduser()
        if not all((folder / file).is_file() for file in CODEC_FILES):
            raise _missing(name, f"the folder {folder} lacks {' or '.join(CODEC_FILES)}")
        return folder
    from huggingface_hub import try_to_load_from_cache
    from huggingface_hub.constants import HF_HUB_CACHE

    found = [try_to_load_from_cache(name, file) for file in CODEC_FILES]
    if not all(isinstance(path, str) for path in found):
        raise _missing(name, f"not in the Hub cache ({HF_HUB_CACHE}; nothing is downloaded here)")
    return Path(found[0]).parent


def codec_config(folder: Path) -> dict[str, Any]:
    """The codec's config.json dict, checked to be Orpheus' layout (``LEVELS`` levels of
    ``CODEBOOK_SIZE`` codes); raises CodecMissing naming what differs."""
    try:
        config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise _missing(str(folder), f"its config.json cannot be read ({exc})") from None
    strides, size = config.get("vq_strides"), config.get("codebook_size", CODEBOOK_SIZE)
    if not isinstance(strides, list) or len(strides) != LEVELS or size != CODEBOOK_SIZE:
        raise _missing(
            str(folder),
            f"a SNAC of {strides} strides and {size} codes, not the {LEVELS} levels of {CODEBOOK_SIZE} codes an "
            f"Orpheus-style model ({TTS_EXAMPLE}) speaks (hubertsiuzdak/snac_24khz)",
        )
    return config


def sampling_rate(config: dict[str, Any]) -> int:
    """The rate (Hz) the codec reads and speaks."""
    return int(config.get("sampling_rate", 24000))


def samples_per_frame(config: dict[str, Any]) -> int:
    """Samples one frame (one level-0 code, 7 tokens) covers: ``hop_length * vq_strides[0]``."""
    return math.prod(config["encoder_rates"]) * config["vq_strides"][0]


def frames(samples: int, config: dict[str, Any]) -> int:
    """Frames ``encode`` makes of a clip of ``samples`` samples (padded on the right as SNAC pads it)."""
    pad_to = math.prod(config["encoder_rates"]) * math.lcm(config["vq_strides"][0], config.get("attn_window_size") or 1)
    return math.ceil(samples / pad_to) * pad_to // samples_per_frame(config)


def load_codec(folder: Path, device: str) -> Any:
    """The SNAC model saved in ``folder`` (``SNAC.from_pretrained``), in eval mode on ``device``;
    raises CodecMissing when its weights cannot be read."""
    from snac import SNAC

    try:
        codec = SNAC.from_pretrained(str(folder))
    except (OSError, RuntimeError, ValueError, TypeError) as exc:
        raise _missing(str(folder), f"its weights cannot be loaded ({exc})") from None
    return codec.to(device).eval()


def encode(codec: Any, samples: Any) -> list[list[int]]:
    """The codes of mono float32 ``samples`` (samples,) at the codec's rate: ``LEVELS`` lists of
    F, 2F and 4F codes."""
    import torch

    device = next(codec.parameters()).device
    audio = torch.as_tensor(samples, dtype=torch.float32, device=device).reshape(1, 1, -1)  # (B, 1, samples)
    with torch.inference_mode():
        codes = codec.encode(audio)
    return [level[0].tolist() for level in codes]


def decode(codec: Any, levels: list[list[int]]) -> Any:
    """Float32 samples (F * samples_per_frame,) of ``levels`` (F, 2F and 4F codes); none for F = 0."""
    import numpy as np
    import torch

    if not levels[0]:
        return np.zeros(0, dtype=np.float32)
    device = next(codec.parameters()).device
    codes = [torch.tensor([level], dtype=torch.long, device=device) for level in levels]
    with torch.inference_mode():
        audio = codec.decode(codes)  # (1, 1, samples)
    return audio[0, 0].float().cpu().numpy().astype(np.float32)


def request_codec(request: Any, device: Optional[str] = None) -> tuple[Any, dict[str, Any]]:
    """(the codec an admitted ``request``'s ``audio_codec`` names, loaded on ``device`` (default: the
    worker's), its config). Raises CodecMissing."""
    folder = codec_folder(request.audio_codec)
    config = codec_config(folder)
    if device is None:
        from trainer_core.models.loading import pick_device

        device = pick_device()
    return load_codec(folder, device), config
