#!/usr/bin/env bash
# A hung peer (SIGSTOP: its kernel still ACKs TCP) is detected by missing
# heartbeats and kicked; the others go on within the timeout. When it resumes
# it finds itself kicked and exits with an error instead of hanging.
. "$(dirname "$0")/lib.sh"
export PCCL_PEER_TIMEOUT_MS=2000 PCCL_TIMEOUT_MS=2000 PCCL_HEARTBEAT_MS=250 # four heartbeats per timeout: one late one kicks nobody
start_master
args=(--workload synthetic --steps 100 --size 200000 --step-delay 20 --min-world 3)
start_peer p1 "${args[@]}"; P1=$LAST_PID
start_peer p2 "${args[@]}"; P2=$LAST_PID
start_peer p3 "${args[@]}"; P3=$LAST_PID
wait_events "$WORK/p1.log" step 10 30
kill -STOP "$P2"
stopped_at=$(count_events "$WORK/p1.log" step)
wait_events "$WORK/p1.log" step $((stopped_at + 10)) 15   # within the 2 s timeout + slack
grep -q "no packet or heartbeat" "$WORK/master.log" || fail "the master did not kick the silent peer"
kill -CONT "$P2"
wait_pid "$P2" 15 && fail "the resumed, kicked peer exited 0"
for p in "$P1" "$P3"; do wait_pid "$p" 60 || fail "a survivor exited with $?"; done
[ "$(json_field "$WORK/p1.log" done hash)" = "$(json_field "$WORK/p3.log" done hash)" ] || fail "survivors differ"
echo "ok: stopped peer kicked after missing heartbeats; survivors finished"
