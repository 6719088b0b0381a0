#!/usr/bin/env bash
# Executes every notebook in notebooks/ with Debian's Jupyter (as CI does);
# fails if any cell raises. The notebooks import dtsim's Python module from
# DTSIM_PYTHONPATH (meson test sets it to the build's), else from ../build.
set -euo pipefail
cd "$(dirname "$0")/.."
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
passed=0
failed=0
for nb in notebooks/*.ipynb; do
  # Executed, and each plt.show() left its figure inline (an image/png output), not in a file.
  if (cd notebooks && jupyter-nbconvert --to notebook --execute --ExecutePreprocessor.timeout=300 \
        --output-dir "$out" "$(basename "$nb")" >"$out/log" 2>&1) &&
     python3 - "$out/$(basename "$nb")" >>"$out/log" 2>&1 <<'CHECK'
import json, sys
cells = json.load(open(sys.argv[1]))["cells"]
shows = sum("".join(c["source"]).count("plt.show()") for c in cells if c["cell_type"] == "code")
images = sum(1 for c in cells for o in c.get("outputs", []) if "image/png" in o.get("data", {}))
print(f"{sys.argv[1]}: {images} inline figures for {shows} plt.show() calls")
sys.exit(0 if images >= shows else 1)
CHECK
  then
    passed=$((passed + 1))
  else
    failed=$((failed + 1))
    echo "FAILED: $nb"
    tail -30 "$out/log"
  fi
done
echo "notebooks: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
