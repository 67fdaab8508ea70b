#!/usr/bin/env bash
# Installs the Debian packages moebench builds and tests with, when any is missing.
# Needs root (or sudo). CUDA, NCCL and cuBLASLt come from the CUDA toolkit, not from here.
# usage: scripts/install_deps.sh [-h|--help]
set -euo pipefail
# The comment block above is the usage: --help prints it to stdout, a bad argument to stderr.
usage() { awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; }
case ${1:-} in
  '') ;;
  -h|--help) usage; exit 0 ;;
  *) echo "install_deps.sh: unknown argument $1 (it takes none)" >&2; usage >&2; exit 2 ;;
esac
pkgs=(cmake g++ make libopenmpi-dev openmpi-bin libcli11-dev nlohmann-json3-dev libspdlog-dev
      libgtest-dev python3-numpy python3-matplotlib clang-format)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "install_deps: all packages present"
  exit 0
fi
echo "install_deps: installing ${missing[*]}"
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO=sudo
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}"
