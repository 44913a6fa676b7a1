#!/usr/bin/env bash
# The main job: install dependencies if missing, build cnnc, compile a zoo model to a .so,
# show its summary and descriptor, and run it (benchmark on synthetic input).
# Usage: bash tools/quickstart.sh [MODEL]   (default: resnet50)
set -euo pipefail
cd "$(dirname "$0")/.."
MODEL=${1:-resnet50}
bash tools/install-deps.sh
cmake -S . -B build -G Ninja >/dev/null
cmake --build build -j "$(nproc)"
echo "=== cnnc models/$MODEL.yml --summary ==="
./build/cnnc "models/$MODEL.yml" --summary | tail -n 8
echo "=== cnnc models/$MODEL.yml -o build/$MODEL.so ==="
time ./build/cnnc "models/$MODEL.yml" -o "build/$MODEL.so" -v
echo "=== cnnrun build/$MODEL.so info ==="
./build/cnnrun "build/$MODEL.so" info
echo "=== cnnrun build/$MODEL.so benchmark ==="
./build/cnnrun "build/$MODEL.so" benchmark --batches 5
