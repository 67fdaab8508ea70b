#!/usr/bin/env bash
# Prepared in session 44 (not run: the device budget was spent). No build: torch on the GPU
# machine. Do zero rows cost a bf16 GEMM less energy, and so less time at the H200's 700 W cap?
# The grouped kernel multiplies the rows past an expert's last row as the next expert's real
# values (21.9% of DeepSeek-V3's EP 2 tile rows, 19.6% of Qwen3-30B-A3B's); session 41's dead-half
# skip (no MMAs on a wholly dead 64-row half) was level in the step. If zero rows run measurably
# faster at the cap, zero-filling the padding rows (TMA zero fill through per-expert tensor maps,
# or zeroing them in shared memory) is worth building; if not, padding is not where the energy
# goes. The same call times the GEMM in FP8 (per-tensor scales) at the cap: the most FP8 can
# buy the expert phases there (issue 16 asks 1.6x). One H200, about 150 s. Copy to devrun/ with
# zero_rows_probe.py and run from the repository root.
set -uo pipefail
S=$OUT/summary.txt
nvidia-smi --query-gpu=name,power.limit,clocks.max.sm --format=csv >> $S 2>&1
timeout 300 python3 devrun/zero_rows_probe.py --rounds 2 >> $S 2>&1
echo "probe rc=$?" >> $S
cat $S
