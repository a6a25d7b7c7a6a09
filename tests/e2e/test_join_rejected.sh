#!/usr/bin/env bash
# `pccl join` and all-reduces the master rejects because another peer's parameters differ
# (tests/e2e/rogue_peer.c runs the synthetic workload's loop with one element fewer):
#  A: the rogue disagrees once: the honest peer reports one "step_rejected" event with the
#     reason, retries the step and completes its steps, ending with the rogue's state hash;
#  B: the rogue always disagrees: the honest peer gives up after --max-rejections 3 rejections
#     in a row with exit 1 and the reason on stderr.
. "$(dirname "$0")/lib.sh"
steps=4

start_master
"$BIN/rogue_peer" "$PORT" 4096 "$steps" 1 > "$WORK/rogue.log" 2> "$WORK/rogue.err" &
G=$!; PIDS+=($G)
start_peer honest --workload synthetic --steps "$steps" --size 4096; H=$LAST_PID
wait_pid "$H" 60 || { cat "$WORK/honest.err" >&2; fail "A: the honest peer failed"; }
wait_pid "$G" 60 || { cat "$WORK/rogue.err" >&2; fail "A: the rogue peer failed"; }
[ "$(count_events "$WORK/honest.log" step_rejected)" = 1 ] || fail "A: expected one step_rejected event"
json_field "$WORK/honest.log" step_rejected reason | grep -q "different count" || fail "A: the event lacks the reason"
[ "$(count_events "$WORK/honest.log" step)" = "$steps" ] || fail "A: the honest peer did not take $steps steps"
[ "$(json_field "$WORK/honest.log" done revision)" = "$steps" ] || fail "A: the honest peer did not reach revision $steps"
[ "$(json_field "$WORK/honest.log" done final_sync_ok)" = true ] || fail "A: the final sync failed"
[ "$(json_field "$WORK/honest.log" done hash)" = "$(json_field "$WORK/rogue.log" done hash)" ] || fail "A: states differ"
kill "$MASTER_PID" 2>/dev/null
wait_pid "$MASTER_PID" 10 >/dev/null 2>&1 # the next master writes master.log anew

start_master
"$BIN/rogue_peer" "$PORT" 4096 "$steps" 1000000 > "$WORK/rogue2.log" 2> "$WORK/rogue2.err" &
G=$!; PIDS+=($G)
start_peer honest2 --workload synthetic --steps "$steps" --size 4096 --max-rejections 3; H=$LAST_PID
wait_pid "$H" 60; st=$?
[ "$st" = 1 ] || { cat "$WORK/honest2.err" >&2; fail "B: the honest peer exited $st, expected 1"; }
[ "$(count_events "$WORK/honest2.log" step_rejected)" = 3 ] || fail "B: expected 3 step_rejected events"
[ "$(json_field "$WORK/honest2.log" step_rejected in_a_row)" = 3 ] || fail "B: the rejections were not counted in a row"
grep -q "giving up after 3 rejected all-reduces in a row" "$WORK/honest2.err" || fail "B: no clear reason on stderr"
echo "ok: one rejected step retried to the end; three in a row end the run with exit 1"
