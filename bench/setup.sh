#!/usr/bin/env bash
# Installs the ONNX Runtime peer of bench/run.py: onnxruntime-node 1.30.0 from npm into
# bench/.ort/ (run.py's default ORT_NODE is bench/.ort/node_modules/onnxruntime-node).
# Installs nodejs and npm with apt-get first when node is missing (needs root or sudo then).
# Running it again reinstalls the same version.  Usage: bash bench/setup.sh
set -euo pipefail
cd "$(dirname "$0")"
if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO=sudo
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -q
  $SUDO apt-get install -y -q nodejs npm
fi
mkdir -p .ort
cd .ort
# npm init -y would name the package after the folder, and ".ort" is not a valid name.
[ -f package.json ] || printf '{\n  "name": "cnnc-bench-ort",\n  "private": true\n}\n' >package.json
npm install --ignore-scripts onnxruntime-node@1.30.0
echo "bench/setup.sh: ORT_NODE=$PWD/node_modules/onnxruntime-node"
