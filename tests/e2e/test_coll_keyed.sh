#!/usr/bin/env bash
# The collectives in a keyed (encrypted) run on 3 peers, while an outsider with another key tries to join: it is
# refused with a clear reason and the members' operations are correct.
. "$(dirname "$0")/lib.sh"
head -c 48 /dev/urandom | base64 > "$WORK/run.key"
head -c 48 /dev/urandom | base64 > "$WORK/other.key"
chmod 600 "$WORK/run.key" "$WORK/other.key"
start_master --key-file "$WORK/run.key"
pids=()
for id in 0 1 2; do
    PCCL_KEY_FILE="$WORK/run.key" "$BIN/coll_peer" "$PORT" "$id" 3 keyed > "$WORK/c$id.log" 2>&1 &
    pids+=($!); PIDS+=($!)
done
PCCL_KEY_FILE="$WORK/other.key" "$BIN/coll_peer" "$PORT" 3 4 keyed > "$WORK/outsider.log" 2>&1 &
out=$!; PIDS+=($out)
for id in 0 1 2; do wait_pid "${pids[$id]}" 90 || fail "keyed coll peer $id failed"; done
rc=0; wait_pid "$out" 30 || rc=$?
[ "$rc" = 3 ] || fail "the outsider exited with $rc, want 3 (refused)"
grep -q "does not hold the run key" "$WORK/outsider.log" || fail "the outsider was not told why"
echo "ok: keyed collectives correct; the outsider was refused"
