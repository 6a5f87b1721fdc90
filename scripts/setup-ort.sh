#!/usr/bin/env bash
# Installs onnxruntime-node 1.30.0 (CPU) under scripts/ort/node_modules for the tests and benchmarks.
# --ignore-scripts: the package ships its CPU binaries; its install script only fetches GPU extras.
set -euo pipefail
here=$(cd "$(dirname "$0")/ort" && pwd)
marker="$here/node_modules/onnxruntime-node/package.json"
if [[ -f "$marker" ]] && grep -q '"version": "1.30.0"' "$marker"; then
  echo "setup-ort: onnxruntime-node 1.30.0 present"
  exit 0
fi
command -v npm >/dev/null || { echo "setup-ort: npm not found: run scripts/install-deps.sh" >&2; exit 2; }
cd "$here"
npm install --no-package-lock --ignore-scripts --no-audit --no-fund --loglevel=error onnxruntime-node@1.30.0 >/dev/null
node -e "import('onnxruntime-node').then(o => console.log('setup-ort: onnxruntime-node', o.env.versions?.common ?? 'ok'))"
