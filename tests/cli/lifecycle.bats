#!/usr/bin/env bats
# How a run is stopped (pccl-master(1) "Stopping", pccl-shutdown(1)): the admin port's keep_run parameter, the
# master's --on-signal, and that ending a run with no peer left to tell does not hold the master up. The runs
# themselves are in tests/e2e/test_shutdown_run.sh and test_join_stop.sh. Helpers in admin_helpers.bash.

load admin_helpers

@test "POST /v1/shutdown says whether the run ends; keep_run takes 1, true, 0 or false" {
    make_token "$TMP/token"
    start_master --admin-token-file "$TMP/token"
    run http POST '/v1/shutdown?keep_run=maybe' "$TOKEN"
    [[ "$output" == "400 "*"keep_run must be 1, true, 0 or false"* ]]
    kill -0 "$MPID"
    run http POST '/v1/shutdown?keep_run=true' "$TOKEN"
    [[ "$output" == '202 {"shutdown":true,"run":"kept"}' ]]
    run timeout 10 tail --pid="$MPID" -f /dev/null
    wait "$MPID"
    grep -q 'shutdown requested on the admin port by 127\.0\.0\.1:[0-9]* (the peers keep the run)' "$TMP/master.err"
    start_master --admin-token-file "$TMP/token"
    run http POST '/v1/shutdown?keep_run=0' "$TOKEN"
    [[ "$output" == '202 {"shutdown":true,"run":"ended"}' ]]
    run timeout 10 tail --pid="$MPID" -f /dev/null
    wait "$MPID"
    MPID=
    grep -q 'ending the run (shutdown requested on the admin port): told 0 peers' "$TMP/master.err"
}

@test "pccl master --on-signal: keep-run or end-run, anything else is a usage error" {
    run "$PCCL" master --listen 127.0.0.1:0 --no-admin --on-signal sometimes
    [ "$status" -eq 2 ]
    [[ "$output" == *"bad --on-signal 'sometimes' (keep-run or end-run)"* ]]
    # one peer outlives a keep-run master and ends with an end-run one on the same address
    MASTER_LISTEN=127.0.0.1:$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
    start_master --on-signal keep-run
    start_peer
    wait_accepted 1
    kill -TERM "$MPID"
    run timeout 5 tail --pid="$MPID" -f /dev/null
    [ "$status" -eq 0 ]
    run wait "$MPID"
    [ "$status" -eq 0 ]
    start_master --on-signal end-run
    wait_accepted 1
    kill -0 "${PEERS[0]}"
    grep -q 'lost the master; reconnecting' "$TMP/peer0.out"
    kill -TERM "$MPID"
    run timeout 5 tail --pid="$MPID" -f /dev/null
    run wait "$MPID"
    [ "$status" -eq 0 ]
    MPID=
    run timeout 5 tail --pid="${PEERS[0]}" -f /dev/null
    run wait "${PEERS[0]}"
    [ "$status" -eq 0 ]
    grep -q 'the run was shut down by the master: the master received SIGTERM' "$TMP/peer0.out"
}

@test "pccl shutdown --keep-run is documented in --help and tells the master to keep the run" {
    run "$PCCL" shutdown --help
    [[ "$output" == *"--keep-run"* ]]
    make_token "$TMP/token"
    start_master --admin-token-file "$TMP/token"
    run "$PCCL" shutdown --admin 127.0.0.1:"$APORT" --admin-token-file "$TMP/token" --keep-run
    [ "$status" -eq 0 ]
    [ "$output" = "master 127.0.0.1:$APORT shut down (the peers keep the run)" ]
    wait "$MPID"
    MPID=
}

@test "a first join retries a master that closes before its welcome, not one that never answers" {
    # A listener that closes its first two connections at once, then accepts and stays silent.
    python3 -c '
import socket, sys, time
s = socket.socket(); s.bind(("127.0.0.1", 0)); s.listen(8)
print(s.getsockname()[1], flush=True)
for _ in range(2):
    c, _ = s.accept(); c.close()
c, _ = s.accept(); time.sleep(30)
' > "$TMP/port" &
    PEERS+=($!)
    for _ in $(seq 1 50); do [ -s "$TMP/port" ] && break; sleep 0.1; done
    start=$(date +%s)
    PCCL_CONNECT_TIMEOUT_MS=500 run timeout 20 "$PCCL" join --master 127.0.0.1:"$(cat "$TMP/port")" \
        --workload synthetic --connect-timeout 30
    [ "$status" -eq 1 ]
    [ "$(grep -c 'closed the connection before welcoming this peer' <<< "$output")" -eq 2 ]
    [[ "$output" == *"did not answer within 500 ms"* ]]
    [ $(( $(date +%s) - start )) -le 10 ]
}
