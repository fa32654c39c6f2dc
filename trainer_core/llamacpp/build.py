"""Where llama.cpp lives and whether it can run here.

llama.cpp comes from the registry's ``llama-cpp-python`` (its sdist vendors llama.cpp and binds its
C API with ctypes). ``scripts/setup.sh`` builds it once, with ``pip install --no-deps --target``,
into ``Settings.llama_cpp_dir`` (beside the converter, outside the app's site-packages: the app's
own ``gguf`` pin is untouched), adds ``diskcache`` (its one pure-Python dependency the app lacks)
and writes ``STAMP``: the version and the CPU features it was built for. The build is native
(``GGML_NATIVE``: the fastest code for this CPU), so a folder built on another CPU (a home folder
shared between machines) is treated as missing and setup rebuilds it, rather than crashing on an
instruction this CPU lacks.

Nothing here imports llama.cpp: it runs in processes of its own (the export's ``probe``, the chat
model's ``serving.gguf_worker``), so a crash in native code ends that process only.
"""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path
from typing import Optional

VERSION = "0.3.36"  # llama-cpp-python, as pinned in scripts/setup.sh
STAMP = "finetune-studio-build.json"
SETUP_HINT = "bash scripts/setup.sh"
# CPU flags (from /proc/cpuinfo) that change what a native build emits.
ISA_FLAGS = ("sse4_2", "avx", "avx2", "fma", "f16c", "avx512f", "avx512bw", "avx512vl", "avx512_vnni")
ISA_FLAGS += ("avx512_bf16", "avx_vnni", "amx_tile", "amx_int8", "amx_bf16", "asimd", "sve")


@lru_cache(maxsize=1)
def cpu_features() -> tuple[str, ...]:
    """The ``ISA_FLAGS`` this CPU has (sorted), read from ``/proc/cpuinfo``; empty where there is
    no such file (the stamp then only checks the version)."""
    try:
        text = Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ()
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key.strip() in ("flags", "Features"):
            return tuple(sorted(set(value.split()) & set(ISA_FLAGS)))
    return ()


def read_stamp(folder: Path) -> Optional[dict]:
    """The build's stamp (``{"version", "cpu_features", "build_seconds"}``), or None."""
    try:
        stamp = json.loads((Path(folder) / STAMP).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return stamp if isinstance(stamp, dict) else None


def missing_message(folder: Path) -> Optional[str]:
    """Why llama.cpp in ``folder`` cannot be used here (not built, another version, built for
    another CPU), naming the command that builds it; None when it can."""
    folder = Path(folder)
    stamp = read_stamp(folder)
    install = f"build it with `{SETUP_HINT}` (about 5 minutes on 2 cores; or set STUDIO_LLAMA_CPP_DIR to a build)"
    if stamp is None or not (folder / "llama_cpp" / "__init__.py").is_file():
        return (
            f"Quantised GGUF formats and the llama.cpp check need llama.cpp, which is not built in {folder}: {install}"
        )
    if not any((folder / "llama_cpp" / "lib").glob("libllama.*")):  # a damaged copy: the package without its library
        return f"llama.cpp in {folder} is incomplete (no llama_cpp/lib/libllama): {install}"
    if stamp.get("version") != VERSION:
        return f"llama.cpp in {folder} is llama-cpp-python {stamp.get('version')}, not {VERSION}: {install}"
    built_for = tuple(stamp.get("cpu_features") or ())
    if cpu_features() and built_for != cpu_features():
        return f"llama.cpp in {folder} was built for another CPU (features {', '.join(built_for) or 'none'}): {install}"
    return None


def write_stamp(folder: Path, build_seconds: float) -> Path:
    """Record a finished build of ``VERSION`` for this CPU in ``folder`` (setup.sh calls this)."""
    path = Path(folder) / STAMP
    stamp = {"version": VERSION, "cpu_features": list(cpu_features()), "build_seconds": round(build_seconds)}
    path.write_text(json.dumps(stamp), encoding="utf-8")
    return path


if __name__ == "__main__":  # python -m trainer_core.llamacpp.build FOLDER SECONDS | --check FOLDER
    import sys

    if sys.argv[1] == "--check":
        problem = missing_message(Path(sys.argv[2]))
        print(problem or "ok")
        sys.exit(1 if problem else 0)
    print(write_stamp(Path(sys.argv[1]), float(sys.argv[2])))
