#!/usr/bin/env bash
# The collectives in a keyed, encrypted run on 3 peers, while an outsider with another key tries to join: it is
# refused with a clear reason and the members' operations are correct.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/coll_lib.sh"
head -c 48 /dev/urandom | base64 > "$WORK/run.key"
head -c 48 /dev/urandom | base64 > "$WORK/other.key"
chmod 600 "$WORK/run.key" "$WORK/other.key"
start_master --key-file "$WORK/run.key" --encrypt
PCCL_KEY_FILE="$WORK/other.key" "$BIN/coll_peer" "$PORT" 3 4 keyed > "$WORK/outsider.log" 2>&1 &
out=$!; PIDS+=($out)
PCCL_KEY_FILE="$WORK/run.key" coll_run 3 keyed 90
rc=0; wait_pid "$out" 30 || rc=$?
[ "$rc" = 3 ] || fail "the outsider exited with $rc, want 3 (refused)"
grep -q "does not hold the run key" "$WORK/outsider.log" || fail "the outsider was not told why"
echo "ok: keyed collectives correct; the outsider was refused"
