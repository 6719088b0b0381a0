#!/usr/bin/env bash
# Installs what dtsim needs from Debian's packages, only what is missing.
# Called by scripts/quickstart.sh and scripts/test.sh (the README's two commands); safe to re-run.
set -euo pipefail

packages=(
  g++ meson ninja-build pkg-config
  libboost-graph-dev nlohmann-json3-dev libfmt-dev libcli11-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  libopenmpi-dev openmpi-bin libopenblas-dev
  chromium  # renders the HTML report in a test
  clang libclang-rt-14-dev  # scripts/fuzz.sh: libFuzzer
  jupyter-nbconvert python3-nbconvert python3-nbformat python3-ipykernel python3-matplotlib  # executes notebooks/ in CI
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

if [ ${#missing[@]} -gt 0 ]; then
  echo "bootstrap: installing ${missing[*]}"
  sudo_cmd=""
  [ "$(id -u)" -ne 0 ] && sudo_cmd="sudo"
  export DEBIAN_FRONTEND=noninteractive
  $sudo_cmd apt-get update -qq
  $sudo_cmd apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
