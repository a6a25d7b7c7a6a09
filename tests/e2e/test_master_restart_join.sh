#!/usr/bin/env bash
# `pccl join --workload fashion-mnist` through a master restart: 3 peers train
# with DiLoCo; the master is SIGKILLed mid-run and started again on the same
# port 2 s later. No peer exits, the revisions go past the pre-crash maximum,
# every peer ends with the same shared-state hash and a test accuracy as good
# as a run without the crash (the demo's floor).
. "$(dirname "$0")/lib.sh"
STEPS=${RESTART_JOIN_STEPS:-30}
start_master
pids=()
for r in 1 2 3; do
    start_peer "p$r" --workload fashion-mnist --steps "$STEPS" --inner-steps 10 --min-world 3 --seed "$r"
    pids+=("$LAST_PID")
done
wait_events "$WORK/p1.log" step 8 120
kill -9 "$MASTER_PID"; wait "$MASTER_PID" 2>/dev/null
before=$(json_field "$WORK/p1.log" step revision)
sleep 2
for i in 0 1 2; do kill -0 "${pids[$i]}" 2>/dev/null || fail "peer $((i + 1)) exited while the master was down"; done
mv "$WORK/master.log" "$WORK/master1.log"
PCCL_LOG_LEVEL=info "$PCCL" master --listen "127.0.0.1:$PORT" --admin 127.0.0.1:0 > "$WORK/master.log" 2>&1 &
MASTER_PID=$!; PIDS+=("$MASTER_PID")
for i in 0 1 2; do wait_pid "${pids[$i]}" 300 || fail "peer $((i + 1)) failed after the restart"; done
grep -q "rebuilt run from 3 peers at revision" "$WORK/master.log" || fail "the new master did not rebuild the run"
h=$(json_field "$WORK/p1.log" done hash)
for n in p2 p3; do [ "$(json_field "$WORK/$n.log" done hash)" = "$h" ] || fail "$n hash differs from p1"; done
[ "$(json_field "$WORK/p1.log" done revision)" = "$STEPS" ] || fail "p1 did not reach revision $STEPS"
acc=$(json_field "$WORK/p1.log" done test_accuracy)
python3 -c "import sys; sys.exit(0 if float(sys.argv[1]) >= 0.75 else 1)" "$acc" || fail "test accuracy $acc"
echo "ok: pccl join through a master restart at revision $before; $STEPS revisions, hash $h, accuracy $acc"
