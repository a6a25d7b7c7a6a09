#!/usr/bin/env bash
# Pipelined collectives (docs/protocol.md "Pipelined collectives"): all-reduces in a loop on one tag run under the
# master's grants (no COMMENCE); a member that changes its count in the middle is rejected on every member with the
# reason and nothing is written; a SIGKILL inside an all-gather run under a grant aborts it on every member, which
# restore and retry (coll_lib.sh coll_kill).
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/coll_lib.sh"
PCCL_LOG_LEVEL=debug start_master
export PCCL_LOG_LEVEL=info
coll_run 3 pipe 60
granted=$(grep -c "tag 9 commenced: all_reduce, op [0-9]*, slots [^,]*, 3 peers (granted)" "$WORK/master.log")
[ "$granted" -ge 8 ] || fail "only $granted of 13 all-reduces ran under a grant"
grep -q "tag 9 rejected: counts differ" "$WORK/master.log" || fail "the master logged no mismatch"
for id in 0 1 2; do
    grep -q "all_reduce tag 9 rejected by the master: counts differ" "$WORK/c$id.log" || fail "ID $id logged no reason"
    [ "$(grep -c '^op ok' "$WORK/c$id.log")" = 13 ] || fail "ID $id: not 13 all-reduces"
    grep -q '^op rejected' "$WORK/c$id.log" || fail "ID $id: the mismatch was not rejected"
done
echo "ok: $granted all-reduces under a grant, a mismatch rejected on every member"
kill $MASTER_PID && wait $MASTER_PID 2>/dev/null
coll_kill all_gather
grep -q "commenced: all_gather, op [0-9]*, slots [^,]*, 3 peers (granted)" "$WORK/master.log" ||
    fail "no all-gather ran under a grant"
# the operation the kill aborted is the last one commenced before the abort: it ran under a grant
last=$(awk '/aborting/ {print prev; exit} /commenced:/ {prev = $0}' "$WORK/master.log")
case "$last" in *"(granted)"*) ;; *) grep -E "commenced|aborting|revoked|completed" "$WORK/master.log" | tail -n 12 >&2
    fail "the aborted all-gather did not run under a grant: $last" ;; esac
echo "ok: a kill inside an all-gather run under a grant aborted it on every member"
