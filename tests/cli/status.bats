#!/usr/bin/env bats
# `pccl status` and the master's admin port: table and --json against a real
# master, exit codes (3 unreachable, 4 stalled naming the peers waited on, 5 no
# progress, 6 no peers, 2 usage), --watch and JSON lines with wall-clock times,
# the HTTP endpoints (200/403/404/405/421 for a foreign Host), a kick that removes
# a real peer and a shutdown, refused requests logged with the client's address.
# Helpers (master, peers, http) in admin_helpers.bash.

load admin_helpers

@test "status prints a table of peers and rings and exits 0 on a healthy run" {
    start_master
    start_peer; start_peer
    wait_accepted 2
    run timeout 10 "$PCCL" status --admin 127.0.0.1:"$APORT"
    [ "$status" -eq 0 ]
    [[ "$output" == *"PEER"*"ADDRESS"*"PHASE"* ]]
    [[ "$output" == *"accepted"* ]]
    [[ "$output" == *"group 0 ring:"*"->"* ]]
    [[ "$output" == *"health: ok"* ]]
}

@test "status --json is the /v1/status document" {
    start_master
    start_peer; start_peer
    wait_accepted 2
    run timeout 10 "$PCCL" status --admin 127.0.0.1:"$APORT" --json
    [ "$status" -eq 0 ]
    echo "$output" | python3 -c '
import json, sys
s = json.load(sys.stdin)
assert len(s["peers"]) == 2, s
for p in s["peers"]:
    assert len(p["uuid"]) == 32 and int(p["uuid"], 16) >= 0
    for k in ("address", "p2p_port", "group", "phase", "state", "revision", "last_heartbeat_ms_ago"): assert k in p, k
g = s["groups"][0]
assert g["id"] == 0 and sorted(g["ring"]) == sorted(p["uuid"] for p in s["peers"])
assert isinstance(g["operations"], list) and isinstance(s["run_operations"], list)
for k in ("collectives_completed", "collectives_aborted", "syncs", "peers_kicked", "peers_left", "control_bytes_sent",
          "control_packets_received"): assert k in s["counters"], k
'
}

@test "admin port: /v1/topology lists measured links once peers optimize the ring" {
    start_master
    # Three peers: a ring of two has one order only, so nothing would be measured.
    for i in 1 2 3; do
        "$PCCL" join --master 127.0.0.1:"$PORT" --workload synthetic --steps 1000000 --step-delay 20 --optimize \
            > "$TMP/opt$i.out" 2>&1 &
        PEERS+=($!)
    done
    for _ in $(seq 1 150); do
        run http GET /v1/topology
        [[ "$output" == *'"mbps"'* ]] && break
        sleep 0.1
    done
    echo "${output#200 }" | python3 -c '
import json, sys
t = json.load(sys.stdin)
ring = [p["uuid"] for p in t["groups"][0]["ring"]]
assert len(ring) == 3 and t["bandwidth"], t
for l in t["bandwidth"]:
    assert l["from"] in ring and l["to"] in ring and l["mbps"] > 0, l
    assert 0 < l["rtt_us"] < 1e6, l  # the probe pings each peer first: a loopback round trip
'
}

@test "status exits 3 when the master is unreachable, within the timeout" {
    start=$(date +%s)
    run timeout 20 "$PCCL" status --admin 127.0.0.1:1 --timeout 1000
    [ "$status" -eq 3 ]
    [[ "$output" == *"unreachable"* ]]
    [ $(( $(date +%s) - start )) -le 5 ]
}

@test "status exits 4 when an operation is stuck (a peer stopped mid-run)" {
    start_master
    start_peer; A=$LAST; start_peer
    wait_accepted 2
    kill -STOP "$A"
    sleep 2
    run timeout 10 "$PCCL" status --admin 127.0.0.1:"$APORT" --stall-after 1
    json=$(timeout 10 "$PCCL" status --admin 127.0.0.1:"$APORT" --json)
    kill -CONT "$A"
    [ "$status" -eq 4 ]
    [[ "$output" == *"health: STALLED ("*", waiting on "* ]]
    # the table names a collective's kind after the operation's
    if grep -q '"kind":"collective"' <<< "$json"; then [[ "$output" == *"  collective all_reduce tag "* ]]; fi
    # The operation in flight, read from the master's records: its age, members and the peers' state.
    echo "$json" | python3 -c '
import json, sys
s = json.load(sys.stdin)
ops = s["run_operations"] + [o for g in s["groups"] for o in g["operations"]]
uuids = {p["uuid"] for p in s["peers"]}
assert ops, s
old = max(ops, key=lambda o: o["age_ms"])
assert old["age_ms"] >= 1000 and old["age_ms"] == s["oldest_operation_age_ms"], s
for o in ops:
    assert o["members"] == len(o["member_uuids"]) and set(o["member_uuids"]) <= uuids, o
    # voting: the scope peers whose vote is missing; running: members that owe a report
    if o["state"] == "voting": assert not set(o["waiting_on"]) & set(o["member_uuids"]), o
    else: assert set(o["waiting_on"]) <= set(o["member_uuids"]), o
if old["kind"] == "collective":
    assert any(p["state"] == "collective" for p in s["peers"]), s
# a collective names its kind (the synthetic workload all-reduces); the other operations have none
for o in ops: assert o["collective_kind"] == ("all_reduce" if o["kind"] == "collective" else None), o
# the stopped peer is the silent one, and the oldest operation waits on it
stopped = max(s["peers"], key=lambda p: p["last_heartbeat_ms_ago"])["uuid"]
assert stopped in old["waiting_on"], (stopped, old)
assert s["health"] == "ok" and s["time"].endswith("Z"), s  # --json used the default --stall-after (60 s)
'
}

@test "status exits 6 without accepted peers, 5 when a group's revision does not advance" {
    start_master
    run timeout 10 "$PCCL" status --admin 127.0.0.1:"$APORT"
    [ "$status" -eq 6 ]
    [[ "$output" == *"health: NO PEERS"* ]]
    # One peer alone never steps (the synthetic workload waits for a second): accepted, revision unchanged.
    start_peer
    wait_accepted 1
    sleep 1.5
    run timeout 10 "$PCCL" status --admin 127.0.0.1:"$APORT" --stall-after 1
    [ "$status" -eq 5 ]
    [[ "$output" == *"health: NO PROGRESS (group 0's revision has not advanced for "* ]]
    run timeout 10 "$PCCL" status --admin 127.0.0.1:"$APORT" --stall-after 1 --json
    [ "$status" -eq 5 ]
    echo "$output" | python3 -c '
import json, sys
s = json.load(sys.stdin)
assert s["health"] == "no progress" and s["groups"][0]["last_revision_advance_ms_ago"] >= 1000, s'
    run timeout 10 "$PCCL" status --admin 127.0.0.1:"$APORT" # within the default 60 s
    [ "$status" -eq 0 ]
    # A second peer: the run steps, the revision advances, health is ok even with --stall-after 1.
    start_peer
    wait_accepted 2
    for _ in $(seq 1 100); do
        timeout 10 "$PCCL" status --admin 127.0.0.1:"$APORT" --stall-after 1 > /dev/null && break
        sleep 0.1
    done
    run timeout 10 "$PCCL" status --admin 127.0.0.1:"$APORT" --stall-after 1
    [ "$status" -eq 0 ]
    [[ "$output" == *"health: ok"* ]]
    run http GET /metrics
    [[ "$output" =~ pccl_group_revision_age_seconds\{group=\"0\"\}\ [0-9.]+ ]]
}

@test "status --watch in a pipe prints plain successive tables, on a terminal it clears the screen" {
    start_master
    run timeout -s INT 3 "$PCCL" status --admin 127.0.0.1:"$APORT" --watch 1
    [ "$(grep -c 'health: NO PEERS' <<< "$output")" -ge 2 ]
    [[ "$output" != *$'\033'* ]]
    # each frame starts with its wall-clock time, ISO 8601 UTC, within a minute of now
    [ "$(grep -c '^[0-9]\{4\}-[0-9][0-9]-[0-9][0-9]T[0-9][0-9]:[0-9][0-9]:[0-9][0-9]Z$' <<< "$output")" -ge 2 ]
    first=$(grep -m1 'Z$' <<< "$output")
    [ $(( $(date +%s) - $(date -d "$first" +%s) )) -le 60 ]
    # --json --watch: one document a line, each with its time and verdict
    run timeout -s INT 3 "$PCCL" status --admin 127.0.0.1:"$APORT" --watch 1 --json
    [ "$(wc -l <<< "$output")" -ge 2 ]
    while read -r line; do
        python3 -c 'import json, sys, datetime
d = json.loads(sys.argv[1])
t = datetime.datetime.strptime(d["time"], "%Y-%m-%dT%H:%M:%SZ")
assert d["health"] == "no peers" and "peers" in d, d' "$line"
    done <<< "$output"
    run timeout 10 "$PCCL" status --admin 127.0.0.1:"$APORT"
    [[ "$output" != *$'\033'* ]]
    # script(1) runs it on a pseudo-terminal.
    command -v script > /dev/null || skip "script(1) not installed"
    script -qec "timeout -s INT 3 '$PCCL' status --admin 127.0.0.1:$APORT --watch 1" /dev/null > "$TMP/tty.out" || true
    grep -q $'\033\[H\033\[2J' "$TMP/tty.out"
}

@test "status shows each group's step rate and reduced bytes per second" {
    start_master
    start_peer; start_peer
    wait_accepted 2
    # The master's rates span 1 to 4 s of samples: wait for them.
    for _ in $(seq 1 50); do
        json=$("$PCCL" status --admin 127.0.0.1:"$APORT" --json)
        grep -q '"revisions_per_s":[0-9]' <<< "$json" && break
        sleep 0.1
    done
    run timeout 10 "$PCCL" status --admin 127.0.0.1:"$APORT"
    [ "$status" -eq 0 ]
    [[ "$output" =~ group\ 0\ ring:.*\ [0-9]+\.[0-9]\ rev/s,\ [0-9.]+\ [kMG]?B/s\ reduced ]]
    echo "$json" | python3 -c '
import json, sys
s = json.load(sys.stdin)
g = s["groups"][0]
# The synthetic peers step every 20 ms: some revisions and all-reduced bytes each second.
assert g["revisions_per_s"] > 1 and g["reduced_bytes_per_s"] > 1000, g
assert g["collectives_completed"] > 0 and g["reduced_bytes"] > 0, g
assert g["reduced_bytes"] % g["collectives_completed"] == 0, g   # the same buffer every step
# by kind: all-reduces only, the group's and the run's, their bytes the reduced bytes
kinds = ["all_reduce", "broadcast", "all_gather", "all_gather_v", "reduce_scatter", "barrier"]
assert list(g["collectives_by_kind"]) == kinds, g
ar = g["collectives_by_kind"]["all_reduce"]
assert ar["completed"] == g["collectives_completed"] and ar["bytes"] == g["reduced_bytes"], g
for k in kinds[1:]: assert g["collectives_by_kind"][k] == {"completed": 0, "aborted": 0, "rejected": 0, "bytes": 0}, g
c = s["counters"]
assert list(c["collectives_by_kind"]) == kinds, c
assert c["collectives_by_kind"]["all_reduce"]["completed"] == c["collectives_completed"] > 0, c
assert c["collectives_by_kind"]["all_reduce"]["rejected"] == c["collectives_rejected"], c
# by algorithm: every completed one under the algorithm the master chose for it
assert list(c["collectives_by_algorithm"]) == ["ring", "rhd", "rd"], c
assert sum(c["collectives_by_algorithm"].values()) == c["collectives_completed"], c
'
    # the table: the group's and the run's collectives by kind
    [[ "$output" =~ "  collectives: all_reduce "[0-9]+" completed, "[0-9]+" aborted, "[0-9]+" rejected, "[0-9.]+" "[kMG]?B ]]
    [[ "$output" =~ "by kind: all_reduce "[0-9]+" completed" ]]
    [[ "$output" =~ "by algorithm: "(ring|rhd|rd)" "[0-9]+ ]]
    [[ "$output" != *"broadcast"* ]]
}

@test "status usage errors exit 2" {
    run "$PCCL" status --bogus
    [ "$status" -eq 2 ]
    run "$PCCL" status --admin 'no where'
    [ "$status" -eq 2 ]
    run "$PCCL" status --watch=-1
    [ "$status" -eq 2 ]
    run "$PCCL" status extra
    [ "$status" -eq 2 ]
    run "$PCCL" status --help
    [ "$status" -eq 0 ]
    [[ "$output" == *"3 master unreachable"*"5 no progress"*"6 no peers"* ]]
}

@test "admin port: a Host that is not loopback, the listen address or an --admin-host name gets 421, logged" {
    make_token "$TMP/token"
    start_master --admin-host Pccl-Master.Example.Internal --admin-token-file "$TMP/token"
    command -v curl > /dev/null || skip "curl not installed"
    # curl with forged Host headers, as a DNS-rebinding page would send them
    for h in evil.example.com evil.example.com:"$APORT" localhost.evil.example.com 127.0.0.1.nip.io \
             "pccl-master.example.internal.evil.com"; do
        for path in /v1/status /v1/topology /metrics / /dashboard.js; do
            code=$(curl -s -o "$TMP/body" -w '%{http_code}' -H "Host: $h" "http://127.0.0.1:$APORT$path")
            [ "$code" = 421 ] || { echo "$h $path: $code"; false; }
            ! grep -q uuid "$TMP/body"
        done
    done
    # a POST with the right token is refused too, and the master goes on
    code=$(curl -s -o /dev/null -w '%{http_code}' -X POST -H "Host: evil.example.com" \
        -H "Authorization: Bearer $TOKEN" "http://127.0.0.1:$APORT/v1/shutdown")
    [ "$code" = 421 ]
    sleep 0.5
    kill -0 "$MPID"
    for h in localhost localhost:"$APORT" 127.0.0.1:"$APORT" 127.0.0.2 "[::1]:$APORT" pccl-master.example.internal \
             PCCL-MASTER.example.internal:"$APORT"; do
        code=$(curl -s -o /dev/null -w '%{http_code}' -H "Host: $h" "http://127.0.0.1:$APORT/v1/status")
        [ "$code" = 200 ] || { echo "$h: $code"; false; }
    done
    grep -q "refused GET /v1/status from 127\.0\.0\.1:[0-9]*: 421" "$TMP/master.err"
    # a wrong token is logged with the client's address as well
    sleep 1.1 # one refusal line a second
    run http POST /v1/shutdown wrong-token-0123456789
    [[ "$output" == "403 "* ]]
    grep -q "refused POST /v1/shutdown from 127\.0\.0\.1:[0-9]*: 403 wrong or missing token" "$TMP/master.err"
    run "$PCCL" master --admin-host 'bad name'
    [ "$status" -eq 2 ]
}

@test "master: a token file that is not private, not the user's or shorter than 16 bytes is refused" {
    echo 0123456789abcdef0123 > "$TMP/open"; chmod 644 "$TMP/open"
    run "$PCCL" master --listen 127.0.0.1:0 --admin 127.0.0.1:0 --admin-token-file "$TMP/open"
    [ "$status" -eq 1 ]
    [[ "$output" == *"token file '$TMP/open' is accessible by group or others (mode 0644)"*"chmod 600"* ]]
    make_token "$TMP/short" short-token
    run "$PCCL" master --listen 127.0.0.1:0 --admin 127.0.0.1:0 --admin-token-file "$TMP/short"
    [ "$status" -eq 1 ]
    [[ "$output" == *"has 11 bytes; at least 16 are needed"* ]]
    # PCCL_ADMIN_TOKEN_FILE is the same flag
    PCCL_ADMIN_TOKEN_FILE="$TMP/short" run "$PCCL" master --listen 127.0.0.1:0 --admin 127.0.0.1:0
    [ "$status" -eq 1 ]
    [[ "$output" == *"at least 16"* ]]
    if [ "$(id -u)" = 0 ]; then # only root can give a file to another user
        make_token "$TMP/foreign"
        chown 65534 "$TMP/foreign"
        run "$PCCL" master --listen 127.0.0.1:0 --admin 127.0.0.1:0 --admin-token-file "$TMP/foreign"
        [ "$status" -eq 1 ]
        [[ "$output" == *"is owned by uid 65534, not by this user"* ]]
        run "$PCCL" kick abcd --admin 127.0.0.1:1 --admin-token-file "$TMP/foreign"
        [ "$status" -eq 1 ]
        [[ "$output" == *"owned by uid 65534"* ]]
    fi
    run "$PCCL" shutdown --admin 127.0.0.1:1 --admin-token-file "$TMP/open"
    [ "$status" -eq 1 ]
    [[ "$output" == *"chmod 600"* ]]
}

@test "admin port: GET endpoints are 200, unknown paths 404, wrong methods 405" {
    start_master
    run http GET /v1/status
    [[ "$output" == "200 {"* ]]
    run http GET /v1/topology
    [[ "$output" == "200 {"*'"bandwidth":null'* ]]
    run http GET /metrics
    [[ "$output" == "200 "* ]]
    [[ "$output" == *'pccl_peers{phase="accepted"} 0'* ]]
    [[ "$output" == *'pccl_collectives_total{result="completed"}'* ]]
    for m in pccl_groups pccl_syncs_total pccl_peers_kicked_total pccl_peers_left_total pccl_master_packets_received_total \
             pccl_master_bytes_sent_total; do [[ "$output" == *"# TYPE $m "* ]]; done
    run http GET /nope
    [[ "$output" == "404 {\"error\""* ]]
    run http POST /v1/status
    [[ "$output" == "405 {\"error\""* ]]
    run http GET /v1/shutdown
    [[ "$output" == "405 "* ]]
}

@test "admin port: one client holds at most 16 connections; the port serves again once they close" {
    start_master
    run python3 - "$APORT" <<'PY'
import socket, sys, time
port = int(sys.argv[1])
held, refused = [], 0
for _ in range(24):
    s = socket.create_connection(("127.0.0.1", port), timeout=2)
    held.append(s)
time.sleep(0.5)
for s in held:  # the master closes the connections beyond the limit at once
    s.settimeout(0.2)
    try:
        if s.recv(1) == b"": refused += 1
    except socket.timeout: pass
    except ConnectionResetError: refused += 1
print("refused", refused)
for s in held: s.close()
PY
    [ "$status" -eq 0 ]
    [ "$output" = "refused 8" ]
    run http GET /v1/status
    [[ "$output" == "200 {"* ]]
}

@test "admin port: kick and shutdown are 403 without a configured token, or with a wrong one" {
    start_master
    run http POST /v1/shutdown
    [[ "$output" == "403 "* ]]
    run http POST /v1/shutdown anything
    [[ "$output" == "403 "* ]]
    kill -9 "$MPID"; wait "$MPID" 2>/dev/null || true
    make_token "$TMP/token"
    start_master --admin-token-file "$TMP/token"
    run http POST /v1/shutdown
    [[ "$output" == "403 "* ]]
    run http POST /v1/shutdown wrong
    [[ "$output" == "403 "* ]]
    run http POST /v1/peers/00000000000000000000000000000000/kick wrong
    [[ "$output" == "403 "* ]]
    run http POST /v1/peers/00000000000000000000000000000000/kick "$TOKEN"
    [[ "$output" == "404 "* ]]
    kill -0 "$MPID"
}

@test "admin port: a kick with the token removes a real peer" {
    make_token "$TMP/token"
    start_master --admin-token-file "$TMP/token"
    start_peer; A=$LAST; start_peer
    wait_accepted 2
    uuid=$(http GET /v1/status | cut -d' ' -f2- | python3 -c 'import json,sys; print(json.load(sys.stdin)["peers"][0]["uuid"])')
    run http POST "/v1/peers/$uuid/kick" "$TOKEN"
    [[ "$output" == "202 "*"$uuid"* ]]
    for _ in $(seq 1 100); do
        http GET /v1/status | grep -q "$uuid" || break
        sleep 0.1
    done
    run http GET /v1/status
    [[ "$output" == "200 "* && "$output" != *"$uuid"* ]]
    run http GET /metrics
    [[ "$output" == *"pccl_peers_kicked_total 1"* ]]
}

@test "admin port: shutdown with the token stops the master (exit 0)" {
    make_token "$TMP/token"
    start_master --admin-token-file "$TMP/token"
    run http POST /v1/shutdown "$TOKEN"
    [[ "$output" == "202 "* ]]
    run timeout 10 tail --pid="$MPID" -f /dev/null
    [ "$status" -eq 0 ]
    wait "$MPID"
    MPID=
}

@test "master --no-admin serves no admin port; a bad token file is an error" {
    "$PCCL" master --listen 127.0.0.1:0 --no-admin > "$TMP/out" 2>&1 &
    MPID=$!
    for _ in $(seq 1 100); do grep -q listening "$TMP/out" && break; sleep 0.05; done
    run grep -c 'admin on' "$TMP/out"
    [ "$output" = 0 ]
    run "$PCCL" master --listen 127.0.0.1:0 --admin-token-file "$TMP/missing"
    [ "$status" -eq 1 ]
    run "$PCCL" master --admin 'bogus!'
    [ "$status" -eq 2 ]
}

@test "a taken admin port: explicit --admin is exit 1, the default only a warning" {
    start_master
    run timeout 10 "$PCCL" master --listen 127.0.0.1:0 --admin 127.0.0.1:"$APORT"
    [ "$status" -eq 1 ]
    [[ "$output" == *"cannot serve the admin port on 127.0.0.1:$APORT"* ]]
    # The default port (48152) may or may not be free on this host: either way the master must start.
    "$PCCL" master --listen 127.0.0.1:0 > "$TMP/second.out" 2> "$TMP/second.err" &
    PEERS+=($!)
    for _ in $(seq 1 100); do grep -q 'listening on' "$TMP/second.out" && break; sleep 0.05; done
    grep -q 'listening on' "$TMP/second.out"
    grep -q 'admin on 127.0.0.1:48152' "$TMP/second.out" || grep -q 'running without it' "$TMP/second.err"
}
