#!/usr/bin/env bash
# Bad input: every rank exits non-zero (no hang: ctest's timeout catches one), the error is printed
# once and names the key, and no result file is left behind.
source "$(dirname "$0")/common.sh"
expect_error() {  # expect_error NP "substring" args...
  local np=$1 want=$2; shift 2
  set +e
  out=$(timeout 120 mpirun --oversubscribe -np "$np" "$MOEBENCH" "$@" --out "$WORK/r.json" 2>&1)
  rc=$?
  set -e
  [ $rc -ne 0 ] || fail "exit 0 for: $*"
  [ $rc -ne 124 ] || fail "hung: $*"
  grep -q -- "$want" <<< "$out" || { echo "$out"; fail "message lacks '$want' for: $*"; }
  n=$(echo "$out" | grep -c -- "$want" || true)
  [ "$n" -eq 1 ] || { echo "$out"; fail "message printed $n times for: $*"; }
  [ ! -e "$WORK/r.json" ] || fail "result file written for: $*"
  echo "ok ($rc): $want"
}
expect_error 4 "mesh.ep" run --config "$TINY" --set mesh.ep=3
expect_error 4 "model.experts" run --config "$TINY" --set model.experts=6 --set mesh.ep=4
expect_error 2 "router.scorr" run --config "$TINY" --set router.scorr=softmax
expect_error 2 "model.topk" run --config "$TINY" --set model.topk=9
expect_error 2 "router.group_topk" run --config "$TINY" --set router.groups=4 --set router.group_topk=5
printf '{\n  "name": "broken",\n  "model": {"hidden": 8,,}\n}\n' > "$WORK/broken.json"
expect_error 2 "line 3" run --config "$WORK/broken.json"
expect_error 2 "no-such-file.json" run --config "$WORK/no-such-file.json"
expect_error 2 "--dump-limit-mib" run --config "$TINY" --dump "$WORK/dump" --dump-limit-mib 1 \
  --set tokens_per_rank=4096
# A --dump that cannot be created is refused before the run, not after its steps.
touch "$WORK/afile"
expect_error 2 "afile is a file, so the directory cannot be created under it" run --config "$TINY" \
  --dump "$WORK/afile/dump"
expect_error 2 "--backend cuda" run --config "$TINY" --backend cuda
expect_error 2 'reference = "gpu" needs --backend cuda' run --config "$TINY" --backend cpu \
  --set reference=gpu
expect_error 2 "reference" run --config "$TINY" --set reference=fpga
expect_error 2 "warmup_s = -1 must be between 0 and 3600" run --config "$TINY" --set warmup_s=-1
# A workload beyond this host's memory is refused before allocating, with the fix for its largest
# part: terabytes of expert weights, or of rows.
expect_error 1 "raise mesh.ep, or lower model.experts or model.ffn (the experts' weights" \
  run --config "$TINY" --set model.ffn=2147483648 --set check=off
expect_error 1 "lower tokens_per_rank (the expert rows and token buffers" run --config "$TINY" \
  --set tokens_per_rank=16777216 --set model.hidden=120 --set model.topk=8 --set check=off
# A short sha for the provenance would be ignored in favour of whatever checkout git finds.
MOE_GIT_COMMIT=924d460 expect_error 2 "MOE_GIT_COMMIT=924d460: not a full 40-digit" \
  run --config "$TINY"
echo "bad_input: PASS"
