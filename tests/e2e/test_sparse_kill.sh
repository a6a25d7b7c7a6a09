#!/usr/bin/env bash
# SIGKILL a member inside a sparse all-reduce of 3 (sparse_peer.c kill): the master aborts it on every member; the
# survivors find their output buffer (in place) or input (out of place) and their residual unchanged, retry, and
# run on as two with outputs that equal the sum of their packs, bit-identical on both.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/sparse_lib.sh"
PCCL_LOG_LEVEL=debug start_master
export PCCL_LOG_LEVEL=info
declare -a sp
for id in 0 1 2; do
    "$BIN/sparse_peer" "$PORT" "$id" 3 kill 0 1 2 > "$WORK/s$id.log" 2>&1 &
    sp[$id]=$!; PIDS+=($!)
done
for _ in $(seq 1 1200); do [ "$(grep -c '^round' "$WORK/s0.log")" -ge 2 ] && break; sleep 0.05; done
[ "$(grep -c '^round' "$WORK/s0.log")" -ge 2 ] || fail "no sparse all-reduce completed on 3 peers"
kill_inside_op "${sp[1]}" 20 "$(grep -c commenced "$WORK/master.log")" || fail "no sparse all-reduce was caught in progress"
for id in 0 2; do wait_pid "${sp[$id]}" 90 || fail "ID $id exited with $?"; done
grep -q "aborting" "$WORK/master.log" || fail "the kill did not land inside an operation (no abort logged)"
for id in 0 2; do grep -q "^op failed: residual unchanged" "$WORK/s$id.log" || fail "ID $id saw no failed operation"; done
grep -o '^round [0-9]* world 2 hash [0-9a-f]*' "$WORK/s0.log" > "$WORK/h0"
grep -o '^round [0-9]* world 2 hash [0-9a-f]*' "$WORK/s2.log" | cmp -s - "$WORK/h0" || fail "the survivors' outputs differ"
echo "ok: a kill inside a sparse all-reduce aborted it everywhere, residuals unchanged, retried as two"
