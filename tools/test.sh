#!/usr/bin/env bash
# The test command: installs dependencies if missing, builds cnnc in build/ (warnings are
# errors), runs the CTest suite except tests labelled "long" (run those with
# CNNC_RUN_LONG=1 ctest --test-dir build -L long).  Extra arguments go to ctest (e.g. -R ref).
# CNNC_BUILD_DIR and CNNC_CMAKE_ARGS override the build directory and add CMake options.
# The kernel sweeps and a few long tests run their quick case sets here (CNNC_TEST_QUICK=1,
# tests/CMakeLists.txt CNNC_QUICK_TESTS); their whole runs are the "long" tests <name>_full.
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/install-deps.sh
B=${CNNC_BUILD_DIR:-build}
cmake -S . -B "$B" -G Ninja -DCNNC_WERROR=ON ${CNNC_CMAKE_ARGS:-} >/dev/null
cmake --build "$B" -j "$(nproc)"
ctest --test-dir "$B" -j "$(nproc)" --output-on-failure -LE long "$@"
