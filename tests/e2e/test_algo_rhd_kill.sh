#!/usr/bin/env bash
# SIGKILL one of 4 peers inside an all-reduce forced to recursive halving and doubling (PCCL_ALGO=rhd): the master
# aborts it on every member, the survivors restore their buffers and retry with 3 (a world that folds); equal
# final hashes and the workload's exact checks prove the retry started from the restored input. A keyed,
# encrypted run (the partners' p2p links are sealed). PCCL_TEST_QUANTIZE=ALGO:TYPE quantizes the all-reduces and
# PCCL_TEST_POOL=P with PCCL_STRIPE_LOCAL=1 stripes them over P connections per partner, PCCL_TEST_STRIPES the
# slots the master must have given (test_algo_rhd_kill_qstripe.sh). PCCL_TEST_ALGO=rd forces recursive doubling
# instead (test_algo_rd_kill.sh).
. "$(dirname "$0")/lib.sh"
head -c 48 /dev/urandom | base64 > "$WORK/run.key"
chmod 600 "$WORK/run.key"
PCCL_LOG_LEVEL=debug start_master --key-file "$WORK/run.key" --encrypt
ALGO=${PCCL_TEST_ALGO:-rhd}
export PCCL_LOG_LEVEL=info PCCL_ALGO=$ALGO PCCL_KEY_FILE="$WORK/run.key"
args=(--workload synthetic --steps 10 --size "${PCCL_TEST_MIDOP_BYTES:-48000000}" --min-world 3
      --quantize "${PCCL_TEST_QUANTIZE:-none}" ${PCCL_TEST_POOL:+--pool "$PCCL_TEST_POOL"})
start_peer p1 "${args[@]}"; P1=$LAST_PID
start_peer p2 "${args[@]}"; P2=$LAST_PID
start_peer p3 "${args[@]}"; P3=$LAST_PID
start_peer p4 "${args[@]}"; P4=$LAST_PID
wait_events "$WORK/p1.log" step 2 90
kill_inside_op "$P2" 8 "$(grep -c commenced "$WORK/master.log")" || fail "no all-reduce was caught in progress"
for p in "$P1" "$P3" "$P4"; do wait_pid "$p" 180 || fail "a surviving peer exited with $?"; done
h=$(json_field "$WORK/p1.log" done hash)
for p in p3 p4; do [ "$(json_field "$WORK/$p.log" done hash)" = "$h" ] || fail "$p's hash differs from p1's"; done
[ "$(json_field "$WORK/p1.log" done revision)" = 10 ] || fail "p1 did not finish"
grep -q "aborting" "$WORK/master.log" || fail "the kill did not land inside an all-reduce (no abort logged)"
grep -q "commenced: all_reduce,.*3 peers, $ALGO$" "$WORK/master.log" || fail "the survivors did not run $ALGO"
! grep -q "commenced: all_reduce,.*, ring$" "$WORK/master.log" || fail "an all-reduce ran the ring"
if [ -n "${PCCL_TEST_STRIPES:-}" ]; then
    grep -q "commenced: all_reduce, op [0-9]*, slots $PCCL_TEST_STRIPES, 3 peers, $ALGO$" "$WORK/master.log" ||
        fail "the survivors' all-reduces were not striped ($PCCL_TEST_STRIPES)"
fi
grep -qE "aborted|failed" "$WORK/p1.err" "$WORK/p3.err" "$WORK/p4.err" || fail "survivors did not see the failed operation"
echo "ok: a kill inside an $ALGO all-reduce aborted it everywhere; 3 survivors retried; hash $h"
