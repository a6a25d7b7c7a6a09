#!/usr/bin/env bash
# The demo stops at once, showing the peers' error, when its peers exit at start (a bad QUANTIZE value)
# instead of waiting for a run that cannot happen.
set -euo pipefail
BIN=$(cd "$1" && pwd)
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
out=$(mktemp); trap 'rm -f "$out"' EXIT
start=$(date +%s)
rc=0; BIN=$BIN QUANTIZE=minmax:bogus timeout 120 "$ROOT/scripts/demo.sh" > "$out" 2>&1 || rc=$?
took=$(( $(date +%s) - start ))
[ "$rc" = 1 ] || { cat "$out"; echo "FAIL: demo exited $rc, want 1"; exit 1; }
grep -q "exited (status 2) before the run got going" "$out" || { cat "$out"; echo "FAIL: no peer error shown"; exit 1; }
grep -q "bad value 'minmax:bogus' for --quantize" "$out" || { cat "$out"; echo "FAIL: the peer's message is missing"; exit 1; }
[ "$took" -lt 60 ] || { echo "FAIL: took ${took}s"; exit 1; }
echo "ok: the demo ended in ${took}s with the peers' error"
