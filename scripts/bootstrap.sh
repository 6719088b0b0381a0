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
  nodejs  # tests/trace_check.mjs reads the Chrome traces with DevTools' trace engine (npm below)
  clang libclang-rt-14-dev  # scripts/fuzz.sh: libFuzzer
  jupyter-nbconvert python3-nbconvert python3-nbformat python3-ipykernel python3-matplotlib  # executes notebooks/ in CI
  python3-pytest python3-jsonschema  # tests/test_schemas.py checks schemas/ against real files
  python3-pil  # tests/test_html_report.cpp counts the colours of a screenshot
  pybind11-dev python3-dev  # the Python module (import dtsim), src/python
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

# Debian's nodejs comes without npm; some nodejs builds carry their own
# and conflict with Debian's npm package, so it is installed only if missing.
if ! command -v npm > /dev/null; then
  echo "bootstrap: installing npm"
  sudo_cmd=""
  [ "$(id -u)" -ne 0 ] && sudo_cmd="sudo"
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq --no-install-recommends npm
fi

# Chrome DevTools' trace engine, from the npm registry, pinned: its API is
# not stable. tests/trace_check.mjs loads it from here (tests/meson.build).
trace_engine=@paulirish/trace_engine@0.0.65
node_prefix="$(cd "$(dirname "$0")/.." && pwd)/.node"
if ! grep -qs '"version": "0.0.65"' "$node_prefix/node_modules/@paulirish/trace_engine/package.json"; then
  echo "bootstrap: installing $trace_engine from the npm registry into $node_prefix"
  # --prefer-offline: a machine that fetched it once (npm keeps ~/.npm) needs no network for it again.
  npm install --prefix "$node_prefix" --prefer-offline --no-audit --no-fund --no-save --loglevel=error "$trace_engine"
fi
