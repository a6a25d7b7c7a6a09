#!/usr/bin/env bash
# A master and 3 peers on loopback: 50 all-reduces each checked exactly
# (synthetic workload), every peer ends with the same shared-state hash.
. "$(dirname "$0")/lib.sh"
start_master
pids=()
for i in 1 2 3; do start_peer "p$i" --workload synthetic --steps 50 --size 400000 --tensors 2 --min-world 3; pids+=("$LAST_PID"); done
for i in 1 2 3; do wait_pid "${pids[$((i-1))]}" 60 || fail "peer p$i exited with $?"; done
h1=$(json_field "$WORK/p1.log" done hash)
[ -n "$h1" ] || fail "p1 printed no final hash"
for i in 1 2 3; do
    [ "$(count_events "$WORK/p$i.log" step)" -eq 50 ] || fail "p$i did not complete 50 steps"
    [ "$(json_field "$WORK/p$i.log" done hash)" = "$h1" ] || fail "p$i hash differs"
    [ "$(json_field "$WORK/p$i.log" done final_sync_ok)" = true ] || fail "p$i final sync failed"
    [ "$(json_field "$WORK/p$i.log" step world_size)" = 3 ] || fail "p$i world size is not 3"
    [ "$(sum_field "$WORK/p$i.log" step tx_bytes)" -gt 0 ] || fail "p$i sent nothing"
done
kill -INT "$MASTER_PID"
wait_pid "$MASTER_PID" 10 || fail "master exited with $? on SIGINT"
echo "ok: 3 peers x 50 checked all-reduces, hash $h1"
