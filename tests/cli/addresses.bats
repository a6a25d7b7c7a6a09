#!/usr/bin/env bats
# Addresses on the command line: every HOST:PORT flag takes IPv4, [IPv6] and host names; a malformed one is a
# usage error (exit 2), a name that does not resolve is not (DNS may answer later: scripts/fleet/peer.sh retries);
# --admin names the admin port everywhere, --master on an admin command answers with a hint; status and shutdown
# pointed at a control port say so; join --p2p-port / --advertise and their environment variables.

load admin_helpers

have_ipv6() { python3 -c 'import socket; s = socket.socket(socket.AF_INET6); s.bind(("::1", 0))' 2>/dev/null; }

@test "malformed addresses are usage errors (exit 2) naming the accepted spellings" {
    for v in 'bad host:1' '10.0.0.1:70000' '[::1' '[::1]x' '1.2.3.400:5' 'host_name:1' '::1:x'; do
        run "$PCCL" join --master "$v"
        [ "$status" -eq 2 ]
        [[ "$output" == *"--master: bad address '$v' (want HOST:PORT, IPV4:PORT or [IPV6]:PORT)"* ]]
        run "$PCCL" master --listen "$v"
        [ "$status" -eq 2 ]
        run "$PCCL" status --admin "$v"
        [ "$status" -eq 2 ]
        run "$PCCL" bench-bandwidth --connect "$v"
        [ "$status" -eq 2 ]
    done
    run "$PCCL" join --master 127.0.0.1:1 --p2p-port 0
    [ "$status" -eq 2 ]
    run "$PCCL" join --master 127.0.0.1:1 --advertise 'a b:1'
    [ "$status" -eq 2 ]
    run "$PCCL" join --master 127.0.0.1:1 --advertise '0.0.0.0:5'
    [ "$status" -eq 2 ]
    [[ "$output" == *"any address"* ]]
}

@test "a host name that does not resolve is a runtime failure, not a usage error" {
    run "$PCCL" join --master no-such-master.invalid:48148 --workload synthetic
    [ "$status" -eq 1 ]
    [[ "$output" == *"cannot resolve 'no-such-master.invalid'"* ]]
    run "$PCCL" join --master 127.0.0.1:1 --workload synthetic --advertise no-such-peer.invalid:5
    [ "$status" -eq 1 ]
    run "$PCCL" master --listen no-such-host.invalid:0
    [ "$status" -eq 1 ]
    run "$PCCL" status --admin no-such-master.invalid
    [ "$status" -eq 3 ]
    [[ "$output" == *"cannot resolve"* ]]
    run "$PCCL" bench-bandwidth --admin no-such-master.invalid:48152
    [ "$status" -eq 3 ] # as status, kick and shutdown
}

@test "PCCL_P2P_PORT and PCCL_ADVERTISE_ADDRESS are checked before the master is contacted" {
    PCCL_P2P_PORT=70000 run "$PCCL" join --master 127.0.0.1:1 --workload synthetic
    [ "$status" -eq 4 ]
    [[ "$output" == *"PCCL_P2P_PORT=70000 is not a port"* ]]
    PCCL_ADVERTISE_ADDRESS='not valid' run "$PCCL" join --master 127.0.0.1:1 --workload synthetic
    [ "$status" -eq 4 ]
    [[ "$output" == *"PCCL_ADVERTISE_ADDRESS: bad address"* ]]
}

@test "--master on an admin command is a usage error that says --admin" {
    for cmd in "status" "bench-bandwidth" "kick abcd" "shutdown"; do
        run "$PCCL" $cmd --master 127.0.0.1:48152
        [ "$status" -eq 2 ]
        [[ "$output" == *"--master is no option of this command: use --admin HOST:PORT"* ]]
    done
}

@test "status and shutdown pointed at a control port say it probably is one" {
    start_master
    run timeout 10 "$PCCL" status --admin 127.0.0.1:"$PORT" --timeout 2000
    [ "$status" -eq 3 ]
    [[ "$output" == *"probably the master's control port"* ]]
    make_token "$TMP/token"
    run timeout 10 "$PCCL" shutdown --admin 127.0.0.1:"$PORT" --admin-token-file "$TMP/token" --timeout 2000
    [ "$status" -eq 3 ]
    [[ "$output" == *"probably the master's control port"* ]]
    run timeout 10 "$PCCL" status --admin localhost:"$APORT"
    [ "$status" -eq 6 ] # reached: a master without peers
}

@test "a master on [::1] serves peers and its admin port over IPv6" {
    have_ipv6 || skip "no IPv6 loopback here"
    MASTER_LISTEN='[::1]:0' MASTER_ADMIN='[::1]:0' start_master
    grep -q 'listening on \[::1\]:' "$TMP/master.out"
    grep -q 'admin on \[::1\]:' "$TMP/master.out"
    "$PCCL" join --master "[::1]:$PORT" --workload synthetic --steps 1000000 --step-delay 20 > "$TMP/p1.out" 2>&1 &
    PEERS+=($!)
    for _ in $(seq 1 100); do
        # accepted, not only registered: a master without accepted peers is "no peers" (exit 6)
        "$PCCL" status --admin "[::1]:$APORT" --json 2>/dev/null | grep -q '"phase":"accepted"' && break
        sleep 0.05
    done
    run timeout 10 "$PCCL" status --admin "[::1]:$APORT" --json
    [ "$status" -eq 0 ]
    [[ "$output" == *'"address":"::1"'* || "$output" == *'"address": "::1"'* ]]
    run timeout 10 "$PCCL" status --admin "[::1]:$APORT"
    [ "$status" -eq 0 ]
    [[ "$output" == *" [::1]:"* ]] # the table brackets an IPv6 address before its port
}

@test "bench-bandwidth serves and measures over IPv6" {
    have_ipv6 || skip "no IPv6 loopback here"
    "$PCCL" bench-bandwidth --server --listen '[::1]:0' > "$TMP/server.out" 2>&1 &
    MPID=$!
    for _ in $(seq 1 100); do grep -q 'listening on' "$TMP/server.out" && break; sleep 0.05; done
    port=$(grep -o 'listening on [^ ]*' "$TMP/server.out" | sed 's/.*://')
    grep -q 'listening on \[::1\]:' "$TMP/server.out"
    run timeout 20 "$PCCL" bench-bandwidth --connect "[::1]:$port" --seconds 1 --json
    [ "$status" -eq 0 ]
    [[ "$output" == *'"target"'*'"::1"'* ]]
}

@test "join --help lists --p2p-port and --advertise" {
    run "$PCCL" join --help
    [[ "$output" == *"--p2p-port PORT"* ]]
    [[ "$output" == *"--advertise HOST[:PORT]"* ]]
}
