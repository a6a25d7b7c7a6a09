#!/usr/bin/env bash
# SIGKILL one of 3 peers mid-run: the survivors go on; a new peer joins through
# the accept phase and receives the shared state; afterwards every peer has the
# same shared-state hash and the old peers never received shared state.
. "$(dirname "$0")/lib.sh"
start_master
STEPS=120
args=(--workload synthetic --steps $STEPS --size 1000000 --step-delay 20 --min-world 3)
start_peer p1 "${args[@]}"; P1=$LAST_PID
start_peer p2 "${args[@]}"; P2=$LAST_PID
start_peer p3 "${args[@]}"; P3=$LAST_PID
wait_events "$WORK/p1.log" step 15 30
kill -9 "$P2"
before=$(count_events "$WORK/p1.log" step)
wait_events "$WORK/p1.log" step $((before + 10)) 30   # survivors continue without p2
start_peer p4 "${args[@]}"; P4=$LAST_PID
for p in "$P1" "$P3" "$P4"; do wait_pid "$p" 90 || fail "a surviving peer exited with $?"; done
[ "$(json_field "$WORK/p1.log" done revision)" = $STEPS ] || fail "p1 did not reach revision $STEPS"
h=$(json_field "$WORK/p1.log" done hash)
for n in p3 p4; do [ "$(json_field "$WORK/$n.log" done hash)" = "$h" ] || fail "$n hash differs from p1"; done
rx4=$(sum_field "$WORK/p4.log" step ss_rx_bytes)
[ "$rx4" -gt 0 ] || fail "the new peer received no shared state"
for n in p1 p3; do
    [ "$(sum_field "$WORK/$n.log" step ss_rx_bytes)" -eq 0 ] || fail "old peer $n received shared state"
    [ "$(json_field "$WORK/$n.log" done ss_rx_bytes)" = 0 ] || fail "old peer $n received state at the end"
done
first4=$(python3 -c "import json,sys; print(next(json.loads(l)['revision'] for l in open(sys.argv[1]) if '\"step\"' in l))" "$WORK/p4.log")
[ "$first4" -gt 20 ] || fail "the new peer started at revision $first4, not mid-run"
echo "ok: kill + rejoin; new peer joined at revision $first4 and received $rx4 bytes; hash $h"
