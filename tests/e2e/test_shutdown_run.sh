#!/usr/bin/env bash
# A run's lifecycle as a supervisor sees it (pccl-master(1), pccl-shutdown(1)):
#  - peers started 5 s before their master wait for it (logging each retry) and then train, `pccl join`
#    by default (--connect-timeout: the reconnect window) and a library peer with PCCL_CONNECT_RETRY_MS;
#  - `pccl shutdown --keep-run` and SIGTERM to a master (default --on-signal keep-run) keep the run: the
#    peers reconnect to the next master on the address and go on from their revision;
#  - `pccl shutdown` and SIGTERM to a master run with --on-signal end-run end it: every peer exits 0 within
#    a few seconds with "the run was shut down", the library's calls return pcclExtRunShutDown.
# (A master that dies keeps the run: test_master_restart*.sh.)
. "$(dirname "$0")/lib.sh"
(umask 077; echo s3cret-token-0123456789 > "$WORK/token")
PORT=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
MASTER_LISTEN=127.0.0.1:$PORT

# wait_gone SECONDS PID...: every PID exits 0 within SECONDS
wait_gone() {
    local limit=$1 p; shift
    for p in "$@"; do wait_pid "$p" "$limit" || fail "process $p exited with $?"; done
}

args=(--workload synthetic --steps 100000 --size 40000 --step-delay 20)
start_peer a "${args[@]}"; A=$LAST_PID
start_peer b "${args[@]}"; B=$LAST_PID
PCCL_CONNECT_RETRY_MS=30000 "$BIN/run_end_peer" "$PORT" > "$WORK/lib.log" 2> "$WORK/lib.err" &
L=$!; PIDS+=("$L")
sleep 5
for p in "$A" "$B" "$L"; do kill -0 "$p" 2>/dev/null || fail "a peer gave up before its master started"; done
grep -q 'not reachable (Connection refused)' "$WORK/a.err" || fail "a did not log its wait for the master"
grep -q 'not reachable (Connection refused)' "$WORK/lib.err" || fail "the library peer did not log its wait"
start_master --admin-token-file "$WORK/token"
wait_events "$WORK/a.log" step 10 60
wait_events "$WORK/b.log" step 10 60
for _ in $(seq 1 100); do grep -q accepted "$WORK/lib.log" && break; sleep 0.1; done
grep -q accepted "$WORK/lib.log" || fail "the library peer was not accepted"

# Keep the run: pccl shutdown --keep-run, then a SIGTERM with the default --on-signal.
out=$("$PCCL" shutdown --admin 127.0.0.1:"$APORT" --admin-token-file "$WORK/token" --keep-run) || fail "pccl shutdown --keep-run failed"
[[ "$out" == *"shut down (the peers keep the run)"* ]] || fail "pccl shutdown --keep-run said: $out"
wait_pid "$MASTER_PID" 10 || fail "the master exited with $? after pccl shutdown --keep-run"
sleep 1.5
for p in "$A" "$B" "$L"; do kill -0 "$p" 2>/dev/null || fail "peer $p exited although the run was kept (a $A, b $B, library $L: $(tail -n 3 "$WORK/lib.err"))"; done
grep -q 'lost the master; reconnecting' "$WORK/a.err" || fail "a did not wait for the next master"
rev=$(json_field "$WORK/a.log" step revision)
start_master --admin-token-file "$WORK/token"
wait_events "$WORK/a.log" step $(( $(count_events "$WORK/a.log" step) + 5 )) 60
[ "$(json_field "$WORK/a.log" step revision)" -gt "$rev" ] || fail "the run did not go on from revision $rev"
kill -TERM "$MASTER_PID"
wait_pid "$MASTER_PID" 10 || fail "the master exited with $? on SIGTERM"
sleep 1.5
for p in "$A" "$B" "$L"; do kill -0 "$p" 2>/dev/null || fail "peer $p exited after a SIGTERM that keeps the run (a $A, b $B, library $L: $(tail -n 3 "$WORK/lib.err"))"; done

# End the run: a master that ends it on a signal, then pccl shutdown on the next one.
start_master --admin-token-file "$WORK/token" --on-signal end-run
wait_events "$WORK/a.log" step $(( $(count_events "$WORK/a.log" step) + 3 )) 60
start_peer c "${args[@]}"; C=$LAST_PID
wait_events "$WORK/c.log" step 3 60
kill -TERM "$MASTER_PID"
t0=$(date +%s%N)
wait_gone 5 "$A" "$B" "$C" "$L"
ms=$(( ($(date +%s%N) - t0) / 1000000 ))
wait_pid "$MASTER_PID" 5 || fail "the master exited with $?"
for n in a b c; do
    grep -q '^pccl join: the run was shut down' "$WORK/$n.err" || fail "$n did not say the run was shut down"
    grep -q 'the master received SIGTERM' "$WORK/$n.err" || fail "$n did not log the master's reason"
    [ "$(count_events "$WORK/$n.log" shut_down)" = 1 ] || fail "$n printed no shut_down event"
done
grep -q '^shut down$' "$WORK/lib.log" || fail "library peer: $(cat "$WORK/lib.err")"
grep -q 'ending the run (the master received SIGTERM): told 4 peers' "$WORK/master.log" || fail "the master did not log the end"

start_master --admin-token-file "$WORK/token"
start_peer d "${args[@]}"; D=$LAST_PID
start_peer e "${args[@]}"; E=$LAST_PID
wait_events "$WORK/d.log" step 3 60
t1=$(date +%s%N)
out=$("$PCCL" shutdown --admin 127.0.0.1:"$APORT" --admin-token-file "$WORK/token") || fail "pccl shutdown failed"
[ "$out" = "master 127.0.0.1:$APORT shut down" ] || fail "pccl shutdown said: $out"
wait_gone 5 "$D" "$E"
ms2=$(( ($(date +%s%N) - t1) / 1000000 ))
for n in d e; do
    grep -q '^pccl join: the run was shut down' "$WORK/$n.err" || fail "$n did not say the run was shut down"
    grep -q 'shutdown requested on the admin port' "$WORK/$n.err" || fail "$n did not log the master's reason"
done
wait_pid "$MASTER_PID" 5 || fail "the master exited with $? after pccl shutdown"
echo "ok: peers waited 5 s for their master; the run kept over --keep-run and a default SIGTERM; ended by --on-signal end-run ($ms ms) and pccl shutdown ($ms2 ms)"
