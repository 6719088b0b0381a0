#!/usr/bin/env bash
# Executes every notebook in notebooks/ with Debian's Jupyter (as CI does);
# fails if any cell raises. DTSIM_BIN names the dtsim binary to call.
set -euo pipefail
cd "$(dirname "$0")/.."
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
passed=0
failed=0
for nb in notebooks/*.ipynb; do
  if (cd notebooks && jupyter-nbconvert --to notebook --execute --ExecutePreprocessor.timeout=300 \
        --output-dir "$out" "$(basename "$nb")" >"$out/log" 2>&1); then
    passed=$((passed + 1))
  else
    failed=$((failed + 1))
    echo "FAILED: $nb"
    tail -30 "$out/log"
  fi
done
echo "notebooks: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
