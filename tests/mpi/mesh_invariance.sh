#!/usr/bin/env bash
# On the CPU backend a token's output, its input gradient, its routing and the router's weight
# gradient do not depend on the mesh or the align padding (each row's arithmetic is the same
# wherever it runs). So the ep 1 schedule that skips the regroups (send order = expert-major
# order), the ep 1 one with padding (regroups run) and ep 2 (all-to-all and regroups) must give
# bitwise equal out, dx, idx and dw_gate digests. A wrong row anywhere changes them.
source "$(dirname "$0")/common.sh"
args=(run --config "$TINY" -q --backend cpu --set router.aux_coeff=0.01 --set capacity_factor=1.0)
mpi 2 "${args[@]}" --set mesh.ep=1 --set mesh.fsdp=2 --out "$WORK/ep1.json" >/dev/null
mpi 2 "${args[@]}" --set mesh.ep=1 --set mesh.fsdp=2 --set align=16 --out "$WORK/ep1_align.json" >/dev/null
mpi 2 "${args[@]}" --set mesh.ep=2 --set mesh.fsdp=1 --out "$WORK/ep2.json" >/dev/null
digest() {
  /usr/bin/python3 -c "import json, sys
d = json.load(open(sys.argv[1]))['digests']
print(' '.join(k + '=' + d[k] for k in ('out', 'dx', 'idx', 'dw_gate')))" "$1"
}
a=$(digest "$WORK/ep1.json")
for other in ep1_align ep2; do
  b=$(digest "$WORK/$other.json")
  echo "ep1:       $a"; echo "$other: $b"
  [ "$a" = "$b" ] || fail "ep1 and $other digests differ"
done
echo "mesh_invariance: PASS"
