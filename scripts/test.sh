#!/usr/bin/env bash
# The README's test command: install missing packages, build, and run the whole CPU test suite
# (unit tests and the mpirun cases). GPU tests (label gpu) are skipped where there is no GPU.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install_deps.sh
BUILD=${BUILD:-build}
cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=Release
cmake --build "$BUILD" -j"$(nproc)"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
ctest --test-dir "$BUILD" --output-on-failure -j"$(nproc)" "$@"
