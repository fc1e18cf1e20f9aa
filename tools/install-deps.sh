#!/usr/bin/env bash
# Installs, from Debian's packages, what building, testing and the demo need
# and this machine lacks. Needs root (or sudo) only when something is missing.
set -euo pipefail
PKGS=(build-essential cmake libopenblas-openmp-dev libcjson-dev libpcre2-dev fortunes)
missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]} == 0)); then
  echo "install-deps: everything is installed"
  exit 0
fi
SUDO=""
[[ $(id -u) == 0 ]] || SUDO=sudo
echo "install-deps: installing ${missing[*]}"
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
