# Shared by the tests/mpi/*.sh cases: $1 = moebench binary, $2 = source dir.
set -euo pipefail
MOEBENCH=$1
SRC=$2
TINY=$SRC/configs/tiny.json
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
mpi() { local np=$1; shift; mpirun --oversubscribe -np "$np" "$MOEBENCH" "$@"; }
fail() { echo "FAIL: $*" >&2; exit 1; }
