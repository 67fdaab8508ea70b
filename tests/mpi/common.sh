# Shared by the tests/mpi/*.sh cases: $1 = moebench binary, $2 = source dir.
set -euo pipefail
MOEBENCH=$1
SRC=$2
TINY=$SRC/configs/tiny.json
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
# The embedded python's shared check (tests/mpi/checks.py).
export PYTHONPATH="$SRC/tests/mpi${PYTHONPATH:+:$PYTHONPATH}"
mpi() { local np=$1; shift; mpirun --oversubscribe -np "$np" "$MOEBENCH" "$@"; }
fail() { echo "FAIL: $*" >&2; exit 1; }
# digests FILE KEY...: the named digests of a result JSON, as "key=value" words.
digests() {
  /usr/bin/python3 -c "import json, sys
d = json.load(open(sys.argv[1]))['digests']
print(' '.join(k + '=' + d[k] for k in sys.argv[2:]))" "$@"
}
# same_digests BASE DISPATCH SUMS MESH...: the caller's run arguments ("${args[@]}") under
# dispatch BASE and under DISPATCH on each mesh "np ep fsdp align": idx, dw_gate, dw_in and dw_out
# must be bitwise equal, and out and dx too where SUMS is "all" or ep is 1 (nothing crosses).
same_digests() {
  local base=$1 dispatch=$2 sums=$3 mesh np ep fsdp align tag a b
  shift 3
  for mesh in "$@"; do
    read -r np ep fsdp align <<<"$mesh"
    local m=(--set mesh.ep="$ep" --set mesh.fsdp="$fsdp" --set align="$align")
    tag="np$np-ep$ep-fsdp$fsdp-align$align"
    mpi "$np" "${args[@]}" "${m[@]}" --set dispatch="$base" --out "$WORK/$base-$tag.json" \
      >/dev/null
    mpi "$np" "${args[@]}" "${m[@]}" --set dispatch="$dispatch" --out "$WORK/$dispatch-$tag.json" \
      >/dev/null
    local keys=(idx dw_gate dw_in dw_out)
    [ "$ep" -eq 1 ] || [ "$sums" = all ] && keys+=(out dx)
    a=$(digests "$WORK/$base-$tag.json" "${keys[@]}")
    b=$(digests "$WORK/$dispatch-$tag.json" "${keys[@]}")
    echo "$tag $base: $a"; echo "$tag $dispatch: $b"
    [ "$a" = "$b" ] || fail "$tag: $base and $dispatch digests differ"
  done
}
# same_digests_as_alltoall DISPATCH MESH...: a dispatcher that gives the experts alltoall's rows
# in alltoall's order; its out and dx sum partials in another order at ep > 1.
same_digests_as_alltoall() {
  local dispatch=$1
  shift
  same_digests alltoall "$dispatch" some "$@"
}
