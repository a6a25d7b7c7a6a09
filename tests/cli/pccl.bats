#!/usr/bin/env bats
# CLI behaviour of the pccl binary: help, version, usage errors, master lifecycle.

setup() {
    PCCL=${PCCL_BIN:-$BATS_TEST_DIRNAME/../../build/bin/pccl}
    TMP=$(mktemp -d)
}

teardown() {
    [ -n "${MPID:-}" ] && kill -9 "$MPID" 2>/dev/null || true
    [ -n "${SPID:-}" ] && kill -9 "$SPID" 2>/dev/null || true
    rm -rf "$TMP"
}

start_master() {
    "$PCCL" master --listen 127.0.0.1:0 --admin 127.0.0.1:0 > "$TMP/master.out" 2> "$TMP/master.err" &
    MPID=$!
    for _ in $(seq 1 100); do
        PORT=$(grep -o 'listening on [0-9.]*:[0-9]*' "$TMP/master.out" 2>/dev/null | sed 's/.*://')
        [ -n "$PORT" ] && return 0
        sleep 0.05
    done
    return 1
}

@test "pccl --help lists every command and exits 0" {
    run "$PCCL" --help
    [ "$status" -eq 0 ]
    [[ "$output" == *"master"* ]]
    [[ "$output" == *"join"* ]]
}

@test "pccl without arguments prints usage and exits 2" {
    run "$PCCL"
    [ "$status" -eq 2 ]
    [[ "$output" == *"usage: pccl"* ]]
}

@test "pccl --version prints the version" {
    run "$PCCL" --version
    [ "$status" -eq 0 ]
    [[ "$output" =~ ^pccl\ [0-9]+\.[0-9]+\.[0-9]+ ]]
}

@test "pccl help CMD and CMD --help show the command's flags" {
    run "$PCCL" help master
    [ "$status" -eq 0 ]
    [[ "$output" == *"--listen"* ]]
    run "$PCCL" join --help
    [ "$status" -eq 0 ]
    [[ "$output" == *"--workload"* ]]
}

@test "-h shows the help of every command, exactly as --help does (exit 0)" {
    cmds=$("$PCCL" __complete)
    [ "$(wc -w <<< "$cmds")" -ge 8 ]
    for cmd in $cmds; do
        [ "$cmd" = help ] && continue
        run "$PCCL" "$cmd" -h
        [ "$status" -eq 0 ] || { echo "$cmd -h: exit $status"; false; }
        [[ "$output" == "usage: pccl $cmd "* ]] || { echo "$cmd -h: $output"; false; }
        [ "$output" = "$("$PCCL" "$cmd" --help)" ] || { echo "$cmd: -h differs from --help"; false; }
    done
    run "$PCCL" bench p2p -h
    [ "$status" -eq 0 ]
    [[ "$output" == "usage: pccl bench-bandwidth "* ]]
}

@test "an unknown command is a usage error (exit 2)" {
    run "$PCCL" frobnicate
    [ "$status" -eq 2 ]
    [[ "$output" == *"unknown command 'frobnicate'. See"* ]]   # nothing is close: no suggestion
}

@test "a mistyped command or flag names the closest one (did you mean), still exit 2" {
    run "$PCCL" stauts
    [ "$status" -eq 2 ]
    [[ "$output" == *"unknown command 'stauts' (did you mean 'status'?)"* ]]
    run "$PCCL" solve-topolgy
    [ "$status" -eq 2 ]
    [[ "$output" == *"(did you mean 'solve-topology'?)"* ]]
    run "$PCCL" help kik
    [ "$status" -eq 2 ]
    [[ "$output" == *"(did you mean 'kick'?)"* ]]
    run "$PCCL" status --admn 127.0.0.1:1
    [ "$status" -eq 2 ]
    [[ "$output" == *"unknown option '--admn' (did you mean '--admin'?)"* ]]
    run "$PCCL" join --stpes=3
    [ "$status" -eq 2 ]
    [[ "$output" == *"unknown option '--stpes=3' (did you mean '--steps'?)"* ]]
    run "$PCCL" kick abcd --admin-tokn-file x
    [ "$status" -eq 2 ]
    [[ "$output" == *"(did you mean '--admin-token-file'?)"* ]]
    # Each command's own table: --steps is join's, not master's.
    run "$PCCL" master --stpes 3
    [ "$status" -eq 2 ]
    [[ "$output" != *"did you mean"* ]]
    run "$PCCL" master --bogus
    [[ "$output" != *"did you mean"* ]]
}

@test "an unknown flag is a usage error (exit 2)" {
    run "$PCCL" master --bogus
    [ "$status" -eq 2 ]
    [[ "$output" == *"unknown option '--bogus'"* ]]
    run "$PCCL" join --master 127.0.0.1:1 --nope
    [ "$status" -eq 2 ]
}

@test "a flag with a value given twice is a usage error in every command (exit 2)" {
    for cmd in $("$PCCL" __complete); do
        [ "$cmd" = help ] || [ "$cmd" = identity ] && continue # no flag of theirs takes a value
        # the first flag of the command's table with an address, file or number (its help shows the metavar)
        read -r flag meta < <("$PCCL" "$cmd" --help | grep -o -- '^  --[a-z-]* \(HOST:PORT\|FILE\|N\|MS\|SECONDS\|B\) ' | head -1)
        [ -n "$flag" ] || { echo "$cmd has no such flag"; false; }
        v=1; [ "$meta" = HOST:PORT ] && v=127.0.0.1:1
        run "$PCCL" "$cmd" "$flag" "$v" "$flag" "$v"
        [ "$status" -eq 2 ] || { echo "$cmd $flag: $status $output"; false; }
        [[ "$output" == *"$flag given twice (it takes one value)"* ]] || { echo "$cmd: $output"; false; }
    done
    run "$PCCL" status --admin 127.0.0.1:1 --admin 127.0.0.1:2
    [ "$status" -eq 2 ]
    run "$PCCL" kick abcd --admin=127.0.0.1:1 --admin 127.0.0.1:2
    [ "$status" -eq 2 ]
    # --admin-host is the one flag that repeats
    run "$PCCL" master --admin-host a.example --admin-host b.example --listen 127.0.0.1:0 --bogus
    [[ "$output" == *"unknown option '--bogus'"* ]]
}

@test "bad flag values are usage errors (exit 2)" {
    run "$PCCL" master --listen 'not an address'
    [ "$status" -eq 2 ]
    run "$PCCL" join --master 127.0.0.1:99999
    [ "$status" -eq 2 ]
    run "$PCCL" join --master 127.0.0.1:1 --workload bogus
    [ "$status" -eq 2 ]
    run "$PCCL" join --master 127.0.0.1:1 --steps -3
    [ "$status" -eq 2 ]
    run "$PCCL" join
    [ "$status" -eq 2 ]
    [[ "$output" == *"--master HOST:PORT is required"* ]]
}

@test "join --quantize rejects unknown or meaningless formats (exit 2)" {
    for q in bogus minmax minmax:float16 minmax:float zps:int32 fancy:uint8 minmax:uint3 zps:uint1 minmax:uint4x; do
        run "$PCCL" join --master 127.0.0.1:1 --quantize "$q"
        [ "$status" -eq 2 ]
        [[ "$output" == *"bad value '$q' for --quantize"* ]]
    done
}

@test "join --quantize runs a quantized synthetic run with equal hashes" {
    start_master
    "$PCCL" join --master 127.0.0.1:"$PORT" --workload synthetic --steps 3 --json --quantize zps:int8 > "$TMP/a.log" &
    A=$!
    run timeout 30 "$PCCL" join --master 127.0.0.1:"$PORT" --workload synthetic --steps 3 --json --quantize zps:int8
    [ "$status" -eq 0 ]
    wait "$A"
    b=$(echo "$output" | grep '"event":"done"' | python3 -c 'import json,sys; print(json.load(sys.stdin)["hash"])')
    a=$(grep '"event":"done"' "$TMP/a.log" | python3 -c 'import json,sys; print(json.load(sys.stdin)["hash"])')
    [ -n "$a" ] && [ "$a" = "$b" ]
}

@test "join --quantize minmax:uint2 and zero-point-scale:uint4 run synthetic runs with equal hashes" {
    start_master
    for q in minmax:uint2 zero-point-scale:uint4; do
        "$PCCL" join --master 127.0.0.1:"$PORT" --workload synthetic --steps 3 --json --quantize "$q" > "$TMP/a.log" &
        A=$!
        run timeout 30 "$PCCL" join --master 127.0.0.1:"$PORT" --workload synthetic --steps 3 --json --quantize "$q"
        [ "$status" -eq 0 ]
        wait "$A"
        b=$(echo "$output" | grep '"event":"done"' | python3 -c 'import json,sys; print(json.load(sys.stdin)["hash"])')
        a=$(grep '"event":"done"' "$TMP/a.log" | python3 -c 'import json,sys; print(json.load(sys.stdin)["hash"])')
        [ -n "$a" ] && [ "$a" = "$b" ]
    done
}

@test "pccl master starts, and stops cleanly on SIGINT and on SIGTERM" {
    start_master
    kill -INT "$MPID"
    run timeout 10 tail --pid="$MPID" -f /dev/null
    [ "$status" -eq 0 ]
    wait "$MPID"
    MPID=
    start_master
    kill -TERM "$MPID"
    wait "$MPID"
    MPID=
}

@test "a port in use is a one-line error and exit 1" {
    start_master
    run timeout 10 "$PCCL" master --listen 127.0.0.1:"$PORT" --no-admin
    [ "$status" -eq 1 ]
    [[ "$output" == *"cannot listen on 127.0.0.1:$PORT"* ]]
}

@test "an unreachable master is an error within a bounded time" {
    start=$(date +%s)
    run timeout 20 "$PCCL" join --master 127.0.0.1:1 --workload synthetic --connect-timeout 2
    [ "$status" -eq 1 ]
    [[ "$output" == *"is not reachable (Connection refused); attempt 1, next in"* ]]
    [[ "$output" == *"gave up after"* ]]
    [[ "$output" == *"cannot join the run"* ]]
    [ $(( $(date +%s) - start )) -le 6 ]
    run timeout 20 "$PCCL" join --master 127.0.0.1:1 --workload synthetic --connect-timeout 0
    [ "$status" -eq 1 ]
    [[ "$output" != *"not reachable"* ]]
    [[ "$output" == *"cannot join the run"* ]]
    PCCL_CONNECT_RETRY_MS=0 run timeout 20 "$PCCL" join --master 127.0.0.1:1 --workload synthetic
    [ "$status" -eq 1 ]
    [[ "$output" != *"not reachable"* ]]
    run "$PCCL" join --master 127.0.0.1:1 --connect-timeout -1
    [ "$status" -eq 2 ]
}

@test "a master that never answers the handshake times out (PCCL_CONNECT_TIMEOUT_MS)" {
    python3 -c '
import socket, sys, time
s = socket.socket(); s.bind(("127.0.0.1", 0)); s.listen(4)
print(s.getsockname()[1], flush=True)
c, _ = s.accept(); time.sleep(30)
' > "$TMP/port" &
    SPID=$!
    for _ in $(seq 1 50); do [ -s "$TMP/port" ] && break; sleep 0.1; done
    start=$(date +%s)
    PCCL_CONNECT_TIMEOUT_MS=500 run timeout 20 "$PCCL" join --master 127.0.0.1:"$(cat "$TMP/port")" --workload synthetic
    [ "$status" -eq 1 ]
    [ $(( $(date +%s) - start )) -le 5 ]
}

@test "join --json reports steps as one JSON object per line" {
    start_master
    "$PCCL" join --master 127.0.0.1:"$PORT" --workload synthetic --steps 3 --json > "$TMP/a.log" &
    A=$!
    run timeout 30 "$PCCL" join --master 127.0.0.1:"$PORT" --workload synthetic --steps 3 --json
    [ "$status" -eq 0 ]
    wait "$A"
    echo "$output" | python3 -c '
import json, sys
evs = [json.loads(l) for l in sys.stdin if l.startswith("{")]
steps = [e for e in evs if e["event"] == "step"]
done = [e for e in evs if e["event"] == "done"]
assert done and done[-1]["revision"] == 3, done
for e in steps:
    for k in ("step", "revision", "world_size", "tx_bytes", "rx_bytes", "ms"): assert k in e, (k, e)
'
}
