#!/usr/bin/env bash
# The README's test command: install missing packages, build, and run the whole CPU test suite
# (unit tests and the mpirun cases). GPU tests (label gpu) are skipped where there is no GPU.
# usage: scripts/test.sh [-h|--help] [-- CTEST ARGS...]
# CTEST ARGS go to ctest as they are (e.g. scripts/test.sh -- -R mpi.dry_run). Environment: BUILD,
# the build folder (default build).
set -euo pipefail
# The comment block above is the usage: --help prints it to stdout, a bad argument to stderr.
usage() { awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; }
CTEST_ARGS=()
while [ $# -gt 0 ]; do
  case $1 in
    -h|--help) usage; exit 0 ;;
    --) shift; CTEST_ARGS=("$@"); break ;;
    *) echo "test.sh: unknown argument $1 (ctest arguments go after --)" >&2; usage >&2; exit 2 ;;
  esac
done
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
ctest --test-dir "$BUILD" --output-on-failure -j"$(nproc)" "${CTEST_ARGS[@]+"${CTEST_ARGS[@]}"}"
