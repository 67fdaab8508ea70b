#!/usr/bin/env bash
# The layering the code map promises (docs/ and DESIGN): core and dispatch/ see the interfaces
# only (comm/comm.h, never a Comm, Device or Ops implementation, never a kernel); a kernel file
# includes core types and utilities and its own backend's files only. Fails naming each include
# that breaks a rule, so a shortcut across the layers is caught in CI, not in review.
set -uo pipefail
cd "${1:?usage: include_rules.sh SOURCE_DIR}"
bad=0
check() {  # check DIR... -- ALLOWED_PREFIX...: every quoted include must start with one of them
  local dirs=() allowed=()
  while [ "$1" != "--" ]; do dirs+=("$1"); shift; done
  shift
  allowed=("$@")
  while IFS= read -r line; do
    file=${line%%:*}
    inc=$(sed -E 's/.*#include "([^"]+)".*/\1/' <<<"$line")
    ok=0
    for a in "${allowed[@]}"; do [[ $inc == $a* ]] && ok=1; done
    if [ $ok -eq 0 ]; then
      echo "include rule: $file includes \"$inc\" (allowed here: ${allowed[*]})"
      bad=1
    fi
  done < <(grep -H '#include "' $(git ls-files --cached --others --exclude-standard "${dirs[@]}" 2>/dev/null || find "${dirs[@]}" -type f))
}
check core dispatch -- core/ dispatch/ comm/comm.h
check kernels/cpu -- core/ kernels/cpu/
check kernels/cuda -- core/ kernels/cuda/
[ $bad -eq 0 ] && echo "include rules: PASS"
exit $bad
