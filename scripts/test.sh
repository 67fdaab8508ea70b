#!/usr/bin/env bash
# The README's test command: install missing packages, build, and run the whole CPU test suite
# (unit tests and the mpirun cases). GPU tests (label gpu) are skipped where there is no GPU.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install_deps.sh
# One .clang-format for everything: a file that drifts from it fails here, before the build.
unformatted=$(git ls-files '*.cpp' '*.h' '*.cu' '*.cuh' | xargs clang-format --dry-run 2>&1 |
  grep -oE '^[^:]+\.(cpp|h|cu|cuh)' | sort -u || true)
if [ -n "$unformatted" ]; then
  echo "not formatted with .clang-format (run clang-format -i on them):"
  echo "$unformatted"
  exit 1
fi
BUILD=${BUILD:-build}
cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=Release
cmake --build "$BUILD" -j"$(nproc)"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
ctest --test-dir "$BUILD" --output-on-failure -j"$(nproc)" "$@"
