#!/usr/bin/env bash
# SIGKILL a peer in the middle of a large (192 MB) all-reduce: the master aborts the
# operation for everyone, the survivors restore their buffers and retry with
# the remaining peers; the exact result checks and equal final hashes prove
# that the retried sums started from the restored input. PCCL_TEST_QUANTIZE=ALGO:TYPE
# runs the same with a quantized all-reduce (test_kill_midop_quant.sh); PCCL_TEST_OOP=1 runs it
# out of place, where the input must come through the failed attempt untouched (test_kill_midop_oop.sh).
# PCCL_TEST_POOL=P joins with a pool of P connections (striped ops: test_kill_midop_stripe.sh).
. "$(dirname "$0")/lib.sh"
PCCL_LOG_LEVEL=debug start_master
export PCCL_LOG_LEVEL=info
# Which send path meets the kill must not depend on the buffer size (smaller under the sanitizers):
# this test splices every op; the out-of-place variant copies (test_kill_midop_oop.sh).
export PCCL_ZEROCOPY_MIN_BYTES=${PCCL_ZEROCOPY_MIN_BYTES:-0}
# Sanitizer builds are much slower, so a smaller buffer still keeps the kill inside the operation.
args=(--workload synthetic --steps 12 --size "${PCCL_TEST_MIDOP_BYTES:-192000000}" --min-world 3
      --quantize "${PCCL_TEST_QUANTIZE:-none}" ${PCCL_TEST_OOP:+--out-of-place} ${PCCL_TEST_POOL:+--pool "$PCCL_TEST_POOL"})
start_peer p1 "${args[@]}"; P1=$LAST_PID
start_peer p2 "${args[@]}"; P2=$LAST_PID
start_peer p3 "${args[@]}"; P3=$LAST_PID
wait_events "$WORK/p1.log" step 3 60
kill_inside_op "$P2" 8 3 || fail "no all-reduce was caught in progress"
for p in "$P1" "$P3"; do wait_pid "$p" 120 || fail "a surviving peer exited with $?"; done
h=$(json_field "$WORK/p1.log" done hash)
[ "$(json_field "$WORK/p3.log" done hash)" = "$h" ] || fail "survivors' hashes differ"
[ "$(json_field "$WORK/p1.log" done revision)" = 12 ] || fail "p1 did not finish"
grep -q "aborting" "$WORK/master.log" || fail "the kill did not land inside an all-reduce (no abort logged)"
if [ -n "${PCCL_TEST_STRIPES:-}" ]; then
    grep -q "commenced: [a-z_]*, op [0-9]*, slots $PCCL_TEST_STRIPES," "$WORK/master.log" || fail "ops were not striped ($PCCL_TEST_STRIPES)"
fi
grep -qE "aborted|failed" "$WORK/p1.err" "$WORK/p3.err" || fail "survivors did not see the failed operation"
echo "ok: mid-operation kill aborted and retried; hash $h"
