#!/usr/bin/env bats
# pccl bench-bandwidth (and its alias pccl bench p2p): server, client, JSON, errors.

setup() {
    PCCL=${PCCL_BIN:-$BATS_TEST_DIRNAME/../../build/bin/pccl}
    TMP=$(mktemp -d)
}

teardown() {
    [ -n "${SPID:-}" ] && kill -9 "$SPID" 2>/dev/null || true
    rm -rf "$TMP"
}

start_server() {
    "$PCCL" bench-bandwidth --server --listen 127.0.0.1:0 "$@" > "$TMP/server.out" 2>&1 &
    SPID=$!
    for _ in $(seq 1 100); do
        PORT=$(grep -o 'listening on [0-9.]*:[0-9]*' "$TMP/server.out" 2>/dev/null | sed 's/.*://')
        [ -n "$PORT" ] && return 0
        sleep 0.05
    done
    return 1
}

@test "client measures both directions against a server (table)" {
    start_server
    run timeout 30 "$PCCL" bench-bandwidth --connect 127.0.0.1:"$PORT" --seconds 1
    [ "$status" -eq 0 ]
    [[ "$output" == *"upload"* ]]
    [[ "$output" == *"download"* ]]
    [[ "$output" == *"measuring upload"* ]]   # progress while it measures
}

@test "bench p2p alias with --json and several streams" {
    start_server
    timeout 30 "$PCCL" bench p2p --connect 127.0.0.1:"$PORT" --seconds 1 --streams 3 --json > "$TMP/out.json"
    python3 -c '
import json, sys
o = json.load(open(sys.argv[1]))
assert o["streams"] == 3 and o["seconds"] == 1, o
for d in ("upload", "download"):
    assert o[d]["mbps"] > 0 and o[d]["bytes"] > 0, o
' "$TMP/out.json"
}

@test "server stops cleanly on SIGINT" {
    start_server
    kill -INT "$SPID"
    wait "$SPID"
    SPID=
}

@test "a pccl peer's p2p port cannot be probed through a closed port: error exit 1" {
    run timeout 20 "$PCCL" bench-bandwidth --connect 127.0.0.1:1 --seconds 1
    [ "$status" -eq 1 ]
    [[ "$output" == *"failed"* ]]
}

key_file() { # $1 path, $2 text
    printf '%s' "$2" > "$1"
    chmod 600 "$1"
}

@test "--key-file: a keyed server answers only clients with its key; --encrypt seals the probe" {
    key_file "$TMP/run.key" "bench-key-0123456789abcdef0123456789abcdef"
    key_file "$TMP/other.key" "another-key-0123456789abcdef0123456789abcd"
    start_server --key-file "$TMP/run.key" --encrypt
    [[ "$(cat "$TMP/server.out")" == *"(keyed, encrypted)"* ]]
    timeout 30 "$PCCL" bench-bandwidth --connect 127.0.0.1:"$PORT" --seconds 1 --key-file "$TMP/run.key" --encrypt \
        --json > "$TMP/enc.json"
    python3 -c '
import json, sys
o = json.load(open(sys.argv[1]))
assert o["security"] == "encrypted", o
for d in ("upload", "download"):
    assert o[d]["mbps"] > 0 and o[d]["bytes"] > 0, o
' "$TMP/enc.json"
    # The key from the environment works the same.
    PCCL_KEY_FILE="$TMP/run.key" run timeout 30 "$PCCL" bench-bandwidth --connect 127.0.0.1:"$PORT" --seconds 1 --encrypt
    [ "$status" -eq 0 ]
    # Without the key, with another key, or without --encrypt: refused, with the reason.
    run timeout 30 "$PCCL" bench-bandwidth --connect 127.0.0.1:"$PORT" --seconds 1
    [ "$status" -eq 1 ]
    run timeout 30 "$PCCL" bench-bandwidth --connect 127.0.0.1:"$PORT" --seconds 1 --key-file "$TMP/other.key" --encrypt
    [ "$status" -eq 1 ]
    [[ "$output" == *"run key"* ]]
    run timeout 30 "$PCCL" bench-bandwidth --connect 127.0.0.1:"$PORT" --seconds 1 --key-file "$TMP/run.key"
    [ "$status" -eq 1 ]
    [[ "$output" == *"encrypts"* ]]
}

@test "--key-file without --encrypt: keyed, open bytes; bad keys are usage or load errors" {
    key_file "$TMP/run.key" "bench-key-0123456789abcdef0123456789abcdef"
    start_server --key-file "$TMP/run.key"
    run timeout 30 "$PCCL" bench-bandwidth --connect 127.0.0.1:"$PORT" --seconds 1 --key-file "$TMP/run.key" --json
    [ "$status" -eq 0 ]
    [[ "$output" == *'"security":'*'"keyed"'* ]]
    run "$PCCL" bench-bandwidth --connect 127.0.0.1:"$PORT" --encrypt
    [ "$status" -eq 2 ]
    [[ "$output" == *"needs a run key"* ]]
    chmod 644 "$TMP/run.key"
    run "$PCCL" bench-bandwidth --connect 127.0.0.1:"$PORT" --key-file "$TMP/run.key"
    [ "$status" -eq 1 ]
    run "$PCCL" bench-bandwidth --connect 127.0.0.1:"$PORT" --key-file "$TMP/missing.key"
    [ "$status" -eq 1 ]
}

@test "usage errors exit 2" {
    run "$PCCL" bench-bandwidth
    [ "$status" -eq 2 ]
    run "$PCCL" bench-bandwidth --server --connect 127.0.0.1:1
    [ "$status" -eq 2 ]
    run "$PCCL" bench-bandwidth --connect 127.0.0.1:1 --seconds 0
    [ "$status" -eq 2 ]
    run "$PCCL" bench-bandwidth --connect 127.0.0.1:1 --streams 65
    [ "$status" -eq 2 ]
    run "$PCCL" bench-bandwidth --connect 'no/where'
    [ "$status" -eq 2 ]
    run "$PCCL" bench-bandwidth --master 127.0.0.1:1
    [ "$status" -eq 2 ]
    [[ "$output" == *"use --admin HOST:PORT"* ]]
}

@test "--admin prints the run's measured bandwidth matrix from the admin port" {
    "$PCCL" master --listen 127.0.0.1:0 --admin 127.0.0.1:0 > "$TMP/master.out" 2>&1 &
    SPID=$!
    for _ in $(seq 1 100); do
        AP=$(grep -o 'admin on [0-9.]*:[0-9]*' "$TMP/master.out" 2>/dev/null | sed 's/.*://')
        CP=$(grep -o 'listening on [0-9.]*:[0-9]*' "$TMP/master.out" 2>/dev/null | sed 's/.*://')
        [ -n "$AP" ] && [ -n "$CP" ] && break
        sleep 0.05
    done
    run "$PCCL" bench-bandwidth --admin 127.0.0.1:"$AP"
    [ "$status" -eq 0 ]
    [[ "$output" == *"no bandwidth measured yet"* ]]
    pids=()
    for i in 1 2 3; do
        "$PCCL" join --master 127.0.0.1:"$CP" --workload synthetic --steps 100000 --min-world 3 --optimize \
            --step-delay 20 > /dev/null 2>&1 &
        pids+=($!)
    done
    for _ in $(seq 1 100); do
        "$PCCL" bench-bandwidth --admin 127.0.0.1:"$AP" --json > "$TMP/topo.json" 2>/dev/null || true
        python3 -c 'import json,sys; b=json.load(open(sys.argv[1]))["bandwidth"]; sys.exit(0 if b and len(b)==6 else 1)' \
            "$TMP/topo.json" && break
        sleep 0.1
    done
    run "$PCCL" bench-bandwidth --admin 127.0.0.1:"$AP"
    # --json carries the matrix in the peers' order, and solve-topology reads it from a pipe.
    "$PCCL" bench-bandwidth --admin 127.0.0.1:"$AP" --json > "$TMP/matrix.json"
    "$PCCL" bench-bandwidth --admin 127.0.0.1:"$AP" --json | "$PCCL" solve-topology --matrix - --json > "$TMP/ring.json"
    for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null || true; done
    [ "$status" -eq 0 ]
    [[ "$output" == *"measured bandwidth"* ]]
    [ "$(echo "$output" | wc -l)" -eq 5 ]   # title, header, 3 peers
    python3 - "$TMP/matrix.json" "$TMP/ring.json" <<'PY'
import json, sys
t, r = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
ids, m = t["peers"], t["bandwidth_mbps"]
assert len(ids) == 3 and len(m) == 3 and all(len(row) == 3 for row in m), t
for l in t["bandwidth"]: assert m[ids.index(l["from"])][ids.index(l["to"])] == l["mbps"], (l, m)
assert sorted(r["ring"]) == [0, 1, 2] and r["n"] == 3 and r["bottleneck_mbps"] > 0, r
PY
}

@test "--connect --json | solve-topology --matrix -: the link as a 2-peer matrix" {
    start_server
    timeout 30 "$PCCL" bench-bandwidth --connect 127.0.0.1:"$PORT" --seconds 1 --json 2>/dev/null > "$TMP/link.json"
    timeout 30 "$PCCL" bench-bandwidth --connect 127.0.0.1:"$PORT" --seconds 1 --json 2>/dev/null |
        "$PCCL" solve-topology --matrix - --json > "$TMP/ring.json"
    python3 - "$TMP/link.json" "$TMP/ring.json" <<'PY'
import json, sys
o, r = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
assert o["peers"] == ["client", "server"], o
assert o["bandwidth_mbps"] == [[0, o["upload"]["mbps"]], [o["download"]["mbps"], 0]], o
assert sorted(r["ring"]) == [0, 1] and r["bottleneck_mbps"] > 0, r
PY
    # An empty pipe is a clear error, not a hang.
    run timeout 10 "$PCCL" solve-topology --matrix - < /dev/null
    [ "$status" -eq 1 ]
    [[ "$output" == *"-: no matrix rows found"* ]]
}

@test "--connect NAME tries every address the name resolves to until one answers" {
    python3 -c 'import socket; socket.socket(socket.AF_INET6).bind(("::1", 0))' 2>/dev/null || skip "no ::1 here"
    unshare -m true 2>/dev/null || skip "no private mount namespace (unshare -m) here"
    "$PCCL" bench-bandwidth --server --listen '[::1]:0' > "$TMP/server.out" 2>&1 &
    SPID=$!
    for _ in $(seq 1 100); do
        PORT=$(grep -o 'listening on \[::1\]:[0-9]*' "$TMP/server.out" 2>/dev/null | sed 's/.*://')
        [ -n "$PORT" ] && break
        sleep 0.05
    done
    [ -n "$PORT" ]
    # a private /etc/hosts gives the name an IPv4 address nobody serves and the server's ::1
    printf '127.0.0.1 pccl-two-addresses\n::1 pccl-two-addresses\n' > "$TMP/hosts"
    run timeout 30 unshare -m sh -c 'mount --bind "$1" /etc/hosts && shift && exec "$@"' sh "$TMP/hosts" \
        "$PCCL" bench-bandwidth --connect "pccl-two-addresses:$PORT" --seconds 1 --json
    [ "$status" -eq 0 ]
    [[ "$output" =~ \"target\":[[:space:]]*\"::1\" ]]
}
