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
# digests FILE KEY...: the named digests of a result JSON, as "key=value" words.
digests() {
  /usr/bin/python3 -c "import json, sys
d = json.load(open(sys.argv[1]))['digests']
print(' '.join(k + '=' + d[k] for k in sys.argv[2:]))" "$@"
}
# same_digests_as_alltoall DISPATCH MESH...: the caller's run arguments ("${args[@]}") under
# alltoall and under DISPATCH on each mesh "np ep fsdp align": a dispatcher that gives the experts
# alltoall's rows in alltoall's order must give its idx, dw_gate, dw_in and dw_out bitwise, and at
# ep 1, where nothing crosses a wire, its out and dx too.
same_digests_as_alltoall() {
  local dispatch=$1 mesh np ep fsdp align tag a b
  shift
  for mesh in "$@"; do
    read -r np ep fsdp align <<<"$mesh"
    local m=(--set mesh.ep="$ep" --set mesh.fsdp="$fsdp" --set align="$align")
    tag="np$np-ep$ep-fsdp$fsdp-align$align"
    mpi "$np" "${args[@]}" "${m[@]}" --out "$WORK/alltoall-$tag.json" >/dev/null
    mpi "$np" "${args[@]}" "${m[@]}" --set dispatch="$dispatch" --out "$WORK/$dispatch-$tag.json" \
      >/dev/null
    local keys=(idx dw_gate dw_in dw_out)
    [ "$ep" -eq 1 ] && keys+=(out dx)
    a=$(digests "$WORK/alltoall-$tag.json" "${keys[@]}")
    b=$(digests "$WORK/$dispatch-$tag.json" "${keys[@]}")
    echo "$tag alltoall: $a"; echo "$tag $dispatch: $b"
    [ "$a" = "$b" ] || fail "$tag: alltoall and $dispatch digests differ"
  done
}
