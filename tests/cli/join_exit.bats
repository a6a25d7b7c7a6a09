#!/usr/bin/env bats
# Exit codes of `pccl join` (man/pccl-join.1.scd): 0 left on SIGTERM/SIGINT, 3 kicked, 4 a local
# configuration error found before the master is contacted. Helpers (master, peers, http) in admin_helpers.bash.

load admin_helpers

# listen_recorder: a TCP listener that writes "connected" to $TMP/connections for each connection; sets SPORT
listen_recorder() {
    python3 -c '
import socket, sys
s = socket.socket(); s.bind(("127.0.0.1", 0)); s.listen(4)
print(s.getsockname()[1], flush=True)
s.settimeout(20)
while True:
    try: c, _ = s.accept()
    except OSError: break
    open(sys.argv[1], "a").write("connected\n")
' "$TMP/connections" > "$TMP/sport" &
    PEERS+=($!)
    for _ in $(seq 1 50); do [ -s "$TMP/sport" ] && break; sleep 0.1; done
    SPORT=$(cat "$TMP/sport")
}

@test "a missing dataset is exit 4, before any connection to the master" {
    listen_recorder
    run timeout 20 "$PCCL" join --master 127.0.0.1:"$SPORT" --workload fashion-mnist --data "$TMP/no-such-dir"
    [ "$status" -eq 4 ]
    [[ "$output" == *"cannot load Fashion-MNIST from $TMP/no-such-dir"* ]]
    [[ "$output" != *"cannot join the run"* ]]
    sleep 0.2
    [ ! -e "$TMP/connections" ]
    # Nobody listens on port 1: the config error still comes first (an unreachable master is exit 1).
    run timeout 20 "$PCCL" join --master 127.0.0.1:1 --workload fashion-mnist --data "$TMP/no-such-dir"
    [ "$status" -eq 4 ]
}

@test "a malformed or unreadable dataset is exit 4" {
    mkdir "$TMP/data"
    for f in train-images-idx3-ubyte train-labels-idx1-ubyte t10k-images-idx3-ubyte t10k-labels-idx1-ubyte; do
        echo garbage > "$TMP/data/$f.gz"
    done
    run timeout 20 "$PCCL" join --master 127.0.0.1:1 --workload fashion-mnist --data "$TMP/data"
    [ "$status" -eq 4 ]
    [[ "$output" == *"cannot load Fashion-MNIST"* ]]
}

@test "flag values that parse but do not work together are exit 4" {
    run timeout 20 "$PCCL" join --master 127.0.0.1:1 --workload synthetic --size 8 --tensors 3
    [ "$status" -eq 4 ]
    [[ "$output" == *"--tensors 3 needs 3 float elements, --size 8 holds 2"* ]]
}

@test "SIGTERM and SIGINT: the peer leaves the run and exits 0 within seconds" {
    start_master
    for sig in TERM INT; do
        "$PCCL" join --master 127.0.0.1:"$PORT" --workload synthetic --steps 1000000 --json > "$TMP/p.out" 2>&1 &
        P=$!
        PEERS+=("$P")
        wait_accepted 1
        kill -"$sig" "$P"
        run timeout 5 tail --pid="$P" -f /dev/null
        [ "$status" -eq 0 ]
        run wait "$P"
        [ "$status" -eq 0 ]
        grep -q '"event":"left","ok":true' "$TMP/p.out"
        wait_accepted 0
    done
    run http GET /metrics
    [[ "$output" == *"pccl_peers_left_total 2"* ]]
    [[ "$output" == *"pccl_peers_kicked_total 0"* ]]
}

@test "a kicked peer exits 3" {
    make_token "$TMP/token"
    start_master --admin-token-file "$TMP/token"
    start_peer; start_peer
    wait_accepted 2
    victim=$(http GET /v1/status | cut -d' ' -f2- |
        python3 -c 'import json,sys; print(json.load(sys.stdin)["peers"][0]["uuid"])')
    run timeout 10 "$PCCL" kick "${victim:0:8}" --admin 127.0.0.1:"$APORT" --admin-token-file "$TMP/token"
    [ "$status" -eq 0 ]
    # the kicked peer exits (the other, alone, waits for peers)
    gone=
    for _ in $(seq 1 100); do
        for p in "${PEERS[@]}"; do kill -0 "$p" 2>/dev/null || gone=$p; done
        [ -n "$gone" ] && break
        sleep 0.1
    done
    [ -n "$gone" ]
    run wait "$gone"
    [ "$status" -eq 3 ]
}
