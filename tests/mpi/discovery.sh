#!/usr/bin/env bash
# moebench list and run --config NAME, from a directory that is not the source tree: the list
# shows configs/bench/deepseek_v3.json's shape, a unique name runs, an ambiguous or unknown name is
# refused with exit 2 naming the candidates, and a path that exists wins over a name.
source "$(dirname "$0")/common.sh"
cd "$WORK"
"$MOEBENCH" list >list.txt 2>&1 || { cat list.txt; fail "list"; }
cat list.txt
grep -Eq '^bench/deepseek_v3 +7168 +2048 +256 +8 +4096 ' list.txt || fail "no DeepSeek-V3 shape in the list"
grep -Eq '^tiny +64 +32 +8 +2 +32 ' list.txt || fail "no tiny in the list"

"$MOEBENCH" run --config bench/deepseek_v3 --dry-run --world 8 --backend cuda >ds.txt 2>&1 ||
  { cat ds.txt; fail "--config bench/deepseek_v3"; }
grep -q "deepseek-v3-layer on 8 ranks" ds.txt || { cat ds.txt; fail "bench/deepseek_v3 not loaded"; }
mpi 2 run --config tiny --set mesh.ep=2 -q >tiny.txt 2>&1 || { cat tiny.txt; fail "--config tiny"; }
grep -q "# check: .* PASS" tiny.txt || { cat tiny.txt; fail "tiny by name did not pass"; }

rc=0
"$MOEBENCH" run --config deepseek_v3 --dry-run >amb.txt 2>&1 || rc=$?
[ "$rc" -eq 2 ] && grep -q "bench/deepseek_v3, models/deepseek_v3" amb.txt ||
  { cat amb.txt; fail "ambiguous name: rc $rc"; }
rc=0
mpi 2 run --config deepseek_v4 >unk.txt 2>&1 || rc=$?
[ "$rc" -eq 2 ] && grep -q "no committed workload of that name" unk.txt &&
  [ "$(grep -c 'no committed workload' unk.txt)" -eq 1 ] || { cat unk.txt; fail "unknown name: rc $rc"; }

# A file of that name here is what runs.
sed 's/"name": "tiny"/"name": "local-tiny"/' "$TINY" >tiny
"$MOEBENCH" run --config tiny --dry-run >local.txt 2>&1 || { cat local.txt; fail "local file"; }
grep -q "local-tiny on 1 rank," local.txt || { cat local.txt; fail "the existing path did not win"; }
echo "discovery: PASS"
