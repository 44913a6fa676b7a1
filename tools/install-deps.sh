#!/usr/bin/env bash
# Installs cnnc's build and test dependencies from Debian 12's packages (idempotent: does
# nothing when they are all present).  Needs root (or sudo).
set -euo pipefail
PKGS=(build-essential cmake ninja-build pkg-config git
      llvm-19-dev clang-19 lld-19 liblld-19-dev libzstd-dev libclang-rt-19-dev libyaml-dev zlib1g-dev
      protobuf-c-compiler libprotobuf-c-dev libonnx-dev libonnx-testdata python3-onnx
      libturbojpeg0-dev libspng-dev python3-pil
      python3 python3-numpy python3-torch python3-torchvision
      dataset-fashion-mnist chromium openmpi-bin libopenmpi-dev)
missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0
SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO=sudo
echo "install-deps: installing ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -q
$SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
