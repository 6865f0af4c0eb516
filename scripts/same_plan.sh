#!/usr/bin/env bash
# Is the examples' JSON plan byte-identical to the one revision REV wrote? For changes that
# only move code (layout issues). Runs REV's code from a copy laid out as the installed
# package (gpufleet.components, .schemas, .policy), in this checkout's .venv with its
# editable finder set aside, and the checkout's own code; compares the two plans.
#   bash scripts/same_plan.sh REV
set -euo pipefail
rev=${1:?usage: scripts/same_plan.sh REV}
repo=$(cd "$(dirname "$0")/.." && pwd)
py="$repo/.venv/bin/python"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/src" "$work/pkg" "$work/old" "$work/new"
git -C "$repo" archive "$rev" | tar -x -C "$work/src"
cp -r "$work/src/gpufleet" "$work/pkg/gpufleet"
for sub in components schemas policy; do cp -r "$work/src/$sub" "$work/pkg/gpufleet/$sub"; done
cp -r "$work/src/examples" "$work/old/examples"
cp -r "$repo/examples" "$work/new/examples"
(cd "$work/old" && PYTHONPATH="$work/pkg" "$py" -c '
import runpy, sys
sys.meta_path = [f for f in sys.meta_path if "editable" not in repr(f).lower()]
sys.argv = ["gpufleet", "plan", "examples/", "--format", "json"]
runpy.run_module("gpufleet", run_name="__main__")' > "$work/old.json")
(cd "$work/new" && "$py" -m gpufleet plan examples/ --format json > "$work/new.json")
if cmp -s "$work/old.json" "$work/new.json"; then
  echo "identical: $(wc -c < "$work/new.json") bytes (examples/ at $rev and now)"
else
  diff <(head -c 200000 "$work/old.json") <(head -c 200000 "$work/new.json") | head -20
  echo "the plans differ"; exit 1
fi
