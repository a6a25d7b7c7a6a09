#!/usr/bin/env bats
# `pccl kick UUID-PREFIX|NAME` and `pccl shutdown` against a real master with real peers: kick by prefix or by
# name, unknown and ambiguous prefixes and names, a refused token, shutdown that waits for the master to go, usage
# errors (exit 2), exit 3 for an unreachable master, the environment defaults and the master logging who kicked or
# shut it down.
# Helpers (master, peers, http) in admin_helpers.bash.

load admin_helpers

# uuids: the uuids of the master's peers, one a line
uuids() {
    http GET /v1/status | cut -d' ' -f2- | python3 -c 'import json,sys; [print(p["uuid"]) for p in json.load(sys.stdin)["peers"]]'
}

@test "kick UUID-PREFIX removes that real peer and leaves the other" {
    make_token "$TMP/token"
    start_master --admin-token-file "$TMP/token"
    start_peer; start_peer
    wait_accepted 2
    victim=$(uuids | head -1); other=$(uuids | tail -1)
    # Upper case and 8 digits, as an operator copies them from `pccl status`.
    run timeout 10 "$PCCL" kick "$(tr a-f A-F <<< "${victim:0:8}")" --admin 127.0.0.1:"$APORT" --admin-token-file "$TMP/token"
    [ "$status" -eq 0 ]
    [[ "$output" == "kicked $victim \"$(hostname)\" (127.0.0.1)" ]] # named by the host name by default
    for _ in $(seq 1 100); do uuids | grep -q "$victim" || break; sleep 0.1; done
    run uuids
    [[ "$output" != *"$victim"* && "$output" == *"$other"* ]]
    run http GET /metrics
    [[ "$output" == *"pccl_peers_kicked_total 1"* ]]
}

@test "kick: a prefix no peer has is exit 1 and kicks nobody" {
    make_token "$TMP/token"
    start_master --admin-token-file "$TMP/token"
    start_peer
    wait_accepted 1
    uuid=$(uuids)
    # The peer's uuid with its first digit changed: no peer can match.
    prefix=$(python3 -c 'import sys; u=sys.argv[1]; print("%x" % ((int(u[0], 16) + 1) % 16) + u[1:8])' "$uuid")
    run timeout 10 "$PCCL" kick "$prefix" --admin 127.0.0.1:"$APORT" --admin-token-file "$TMP/token"
    [ "$status" -eq 1 ]
    [[ "$output" == *"no peer is named '$prefix' or has a uuid starting with it"* ]]
    run http GET /metrics
    [[ "$output" == *"pccl_peers_kicked_total 0"* ]]
}

@test "kick: an ambiguous prefix is exit 1, lists the candidates and kicks nobody" {
    # Random uuids of real peers share a 4-digit prefix too rarely, so a stand-in admin port serves
    # a status document with two peers that do; it records every request it gets.
    python3 - "$TMP/port" "$TMP/requests" <<'PY' &
import http.server, json, sys
peers = [{"uuid": "abcd" + "1" * 28, "address": "10.0.0.1", "phase": "accepted"},
         {"uuid": "abcd" + "2" * 28, "address": "10.0.0.2", "phase": "accepted"},
         {"uuid": "ffff" + "3" * 28, "address": "10.0.0.3", "phase": "accepted"}]
class H(http.server.BaseHTTPRequestHandler):
    def log_message(self, *a): pass
    def answer(self, code, body):
        open(sys.argv[2], "a").write(self.command + " " + self.path + "\n")
        self.send_response(code); self.end_headers(); self.wfile.write(body.encode())
    def do_GET(self): self.answer(200, json.dumps({"peers": peers}))
    def do_POST(self): self.answer(202, "{}")
s = http.server.HTTPServer(("127.0.0.1", 0), H)
open(sys.argv[1], "w").write(str(s.server_port))
s.serve_forever()
PY
    MPID=$!
    for _ in $(seq 1 100); do [ -s "$TMP/port" ] && break; sleep 0.05; done
    make_token "$TMP/token"
    run timeout 10 "$PCCL" kick abcd --admin 127.0.0.1:"$(cat "$TMP/port")" --admin-token-file "$TMP/token"
    [ "$status" -eq 1 ]
    [[ "$output" == *"'abcd' is ambiguous; 2 peers match"* ]]
    [[ "$output" == *"abcd1111111111111111111111111111  10.0.0.1"* ]]
    [[ "$output" == *"abcd2222222222222222222222222222  10.0.0.2"* ]]
    [[ "$output" != *ffff* ]]
    ! grep -q POST "$TMP/requests"
    # One more digit resolves it.
    run timeout 10 "$PCCL" kick abcd2 --admin 127.0.0.1:"$(cat "$TMP/port")" --admin-token-file "$TMP/token"
    [ "$status" -eq 0 ]
    grep -qx "POST /v1/peers/abcd2222222222222222222222222222/kick" "$TMP/requests"
}

@test "kick NAME removes the peer of that name; a name two peers share is refused" {
    make_token "$TMP/token"
    start_master --admin-token-file "$TMP/token"
    PCCL_NAME=trainer-a start_peer; A=$LAST
    PCCL_NAME=trainer-b start_peer
    PCCL_NAME=trainer-b start_peer
    wait_accepted 3
    run timeout 10 "$PCCL" status --admin 127.0.0.1:"$APORT"
    [[ "$output" == *"NAME"* && "$output" == *"trainer-a"* && "$output" == *"trainer-b"* ]]
    run timeout 10 "$PCCL" kick trainer-b --admin 127.0.0.1:"$APORT" --admin-token-file "$TMP/token"
    [ "$status" -eq 1 ]
    [[ "$output" == *"'trainer-b' is ambiguous; 2 peers match"* && "$output" == *'"trainer-b"  127.0.0.1'* ]]
    run http GET /metrics
    [[ "$output" == *"pccl_peers_kicked_total 0"* ]]
    run timeout 10 "$PCCL" kick trainer-a --admin 127.0.0.1:"$APORT" --admin-token-file "$TMP/token"
    [ "$status" -eq 0 ]
    [[ "$output" == "kicked "*' "trainer-a" (127.0.0.1)' ]]
    for _ in $(seq 1 100); do kill -0 "$A" 2>/dev/null || break; sleep 0.1; done
    ! kill -0 "$A" 2>/dev/null # the kicked peer's pccl join ended
    grep -q 'peer [0-9a-f]\{8\} "trainer-a" (127.0.0.1:[0-9]*)' "$TMP/master.err" # the master's log names it
    run http GET /v1/status
    [[ "$output" != *'"trainer-a"'* && "$output" == *'"name":"trainer-b"'* ]]
}

@test "kick and shutdown: a wrong token is exit 1 and changes nothing" {
    make_token "$TMP/token"
    make_token "$TMP/wrong" wrong-token-0123456789
    start_master --admin-token-file "$TMP/token"
    start_peer
    wait_accepted 1
    run timeout 10 "$PCCL" kick "$(uuids | cut -c1-8)" --admin 127.0.0.1:"$APORT" --admin-token-file "$TMP/wrong"
    [ "$status" -eq 1 ]
    [[ "$output" == *"refused the token"* ]]
    run timeout 10 "$PCCL" shutdown --admin 127.0.0.1:"$APORT" --admin-token-file "$TMP/wrong"
    [ "$status" -eq 1 ]
    [[ "$output" == *"refused the token"* ]]
    kill -0 "$MPID"
    wait_accepted 1
}

@test "shutdown stops a real master (exit 0) and returns once its admin port is gone" {
    make_token "$TMP/token"
    start_master --admin-token-file "$TMP/token"
    start_peer
    wait_accepted 1
    run timeout 10 "$PCCL" shutdown --admin 127.0.0.1:"$APORT" --admin-token-file "$TMP/token"
    [ "$status" -eq 0 ]
    [[ "$output" == "master 127.0.0.1:$APORT shut down" ]]
    run timeout 10 "$PCCL" status --admin 127.0.0.1:"$APORT" --timeout 1000
    [ "$status" -eq 3 ]
    run timeout 10 tail --pid="$MPID" -f /dev/null
    wait "$MPID"
    MPID=
}

@test "kick and shutdown: unreachable master is exit 3 (as in status); usage errors exit 2" {
    make_token "$TMP/token"
    run timeout 10 "$PCCL" kick abcd1234 --admin 127.0.0.1:1 --admin-token-file "$TMP/token" --timeout 1000
    [ "$status" -eq 3 ]
    [[ "$output" == *"unreachable"* ]]
    run timeout 10 "$PCCL" shutdown --admin 127.0.0.1:1 --admin-token-file "$TMP/token" --timeout 1000
    [ "$status" -eq 3 ]
    [[ "$output" == *"unreachable"* ]]
    run "$PCCL" kick "$(printf 'a\tb')" --admin-token-file "$TMP/token"
    [ "$status" -eq 2 ]
    [[ "$output" == *"want 4 to 32 hex digits of its uuid, or its name"* ]]
    run "$PCCL" kick "$(printf 'n%.0s' $(seq 1 64))" --admin-token-file "$TMP/token"
    [ "$status" -eq 2 ]
    run "$PCCL" kick "" --admin-token-file "$TMP/token"
    [ "$status" -eq 2 ]
    run "$PCCL" kick --admin-token-file "$TMP/token"
    [ "$status" -eq 2 ]
    run "$PCCL" kick abcd
    [ "$status" -eq 2 ]
    [[ "$output" == *"--admin-token-file FILE (or env PCCL_ADMIN_TOKEN_FILE) is required"* ]]
    run "$PCCL" kick abcd abce --admin-token-file "$TMP/token"
    [ "$status" -eq 2 ]
    run "$PCCL" shutdown --admin 'no where' --admin-token-file "$TMP/token"
    [ "$status" -eq 2 ]
    run "$PCCL" shutdown --admin nowhere.invalid --admin-token-file "$TMP/token"
    [ "$status" -eq 3 ]
    [[ "$output" == *"cannot resolve 'nowhere.invalid'"* ]]
    run "$PCCL" kick abcd --master 127.0.0.1:1 --admin-token-file "$TMP/token"
    [ "$status" -eq 2 ]
    [[ "$output" == *"use --admin HOST:PORT"* ]]
    run "$PCCL" shutdown
    [ "$status" -eq 2 ]
    run "$PCCL" kick abcd --admin-token-file "$TMP/missing"
    [ "$status" -eq 1 ]
}

@test "kick and shutdown: --token-file is --admin-token-file now (exit 2 with a hint); env PCCL_ADMIN_ADDR and PCCL_ADMIN_TOKEN_FILE" {
    make_token "$TMP/token"
    for cmd in "kick abcd" shutdown; do
        run "$PCCL" $cmd --token-file "$TMP/token"
        [ "$status" -eq 2 ]
        [[ "$output" == *"--token-file is no option of this command: use --admin-token-file FILE"* ]]
    done
    start_master --admin-token-file "$TMP/token"
    start_peer; start_peer
    wait_accepted 2
    victim=$(uuids | head -1)
    # the address and the token from the environment alone
    PCCL_ADMIN_ADDR=127.0.0.1:"$APORT" PCCL_ADMIN_TOKEN_FILE="$TMP/token" run timeout 10 "$PCCL" kick "${victim:0:8}"
    [ "$status" -eq 0 ]
    [[ "$output" == "kicked $victim \"$(hostname)\" (127.0.0.1)" ]]
    # the master logs who asked
    for _ in $(seq 1 50); do grep -q "kicked on the admin port by" "$TMP/master.err" && break; sleep 0.1; done
    grep -q "peer $victim kicked on the admin port by 127\.0\.0\.1:[0-9]*" "$TMP/master.err"
    PCCL_ADMIN_ADDR=127.0.0.1:"$APORT" run timeout 10 "$PCCL" status --json
    [ "$status" -eq 0 ] || [ "$status" -eq 5 ]
    [[ "$output" == *'"peers"'* ]]
    # a flag beats the environment
    PCCL_ADMIN_ADDR=127.0.0.1:1 run timeout 10 "$PCCL" status --admin 127.0.0.1:"$APORT" --json
    [[ "$output" == *'"peers"'* ]]
    PCCL_ADMIN_ADDR='no where' run "$PCCL" status
    [ "$status" -eq 2 ]
    [[ "$output" == *"PCCL_ADMIN_ADDR"* ]]
    PCCL_ADMIN_ADDR=127.0.0.1:"$APORT" PCCL_ADMIN_TOKEN_FILE="$TMP/token" run timeout 10 "$PCCL" shutdown
    [ "$status" -eq 0 ]
    grep -q "shutdown requested on the admin port by 127\.0\.0\.1:[0-9]*" "$TMP/master.err"
    wait "$MPID"
    MPID=
}
