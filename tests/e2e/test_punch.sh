#!/usr/bin/env bash
# TCP hole punching through the master's rendezvous (docs/nat.md), on loopback: peer c advertises a port nobody
# listens on, so every direct dial of it fails and the master's reachability probe finds it unreachable; its
# ring predecessor asks the master for a rendezvous and both sides dial each other's observed address (c's
# control connection leaves from its p2p port, so that is its real listening port). The run forms, every
# all-reduce of the synthetic workload completes with one hash, /v1/status shows c unreachable with its observed
# address, the others reachable, and an edge to c that was punched (so does pccl status). Then again in a keyed and encrypted run:
# the greeting proves the key and the ring is encrypted end to end over the punched connection.
. "$(dirname "$0")/lib.sh"

head -c 48 /dev/urandom | base64 > "$WORK/run.key"
chmod 600 "$WORK/run.key"

punched() {
    "$PCCL" status --admin "127.0.0.1:$APORT" --json > "$WORK/status.json" 2> "$WORK/status.err"
    python3 - "$WORK/status.json" "$closed" <<'PY'
import json, sys
peers = json.load(open(sys.argv[1]))["peers"]
assert len(peers) == 3, peers
c = [p for p in peers if p["p2p_port"] == int(sys.argv[2])]
assert len(c) == 1, peers
c = c[0]
assert c["reachable"] is False, c
assert c["observed"].startswith("127.0.0.1:") and c["observed"] != "127.0.0.1:" + sys.argv[2], c
for p in peers:
    if p is not c:
        assert p["reachable"] is True, p
kinds = [e["kind"] for p in peers for e in p["edges"] if e["peer"] == c["uuid"]]
assert "punched" in kinds, [p["edges"] for p in peers]
PY
    [ $? -eq 0 ] || return 1
    # the table says it too (its NAT traversal section)
    "$PCCL" status --admin "127.0.0.1:$APORT" > "$WORK/status.txt" 2>&1
    grep -q "unreachable, observed 127.0.0.1:" "$WORK/status.txt" && grep -q "punched with" "$WORK/status.txt"
}

# run_punch NAME [MASTER AND PEER FLAGS...]: peers NAMEa, NAMEb and NAMEc (unreachable) run 20 steps
run_punch() {
    local n=$1; shift
    closed=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
    start_master "$@"
    local args=(--workload synthetic --steps 20 --size 100000 --step-delay 100 --min-world 3)
    start_peer "${n}a" "${args[@]}" "${PEER_FLAGS[@]}"; local pa=$LAST_PID
    start_peer "${n}b" "${args[@]}" "${PEER_FLAGS[@]}"; local pb=$LAST_PID
    start_peer "${n}c" "${args[@]}" "${PEER_FLAGS[@]}" --advertise "127.0.0.1:$closed"; local pc=$LAST_PID
    local deadline=$((SECONDS + 30)) p h1 x
    until punched 2> "$WORK/check.err"; do
        [ "$SECONDS" -lt "$deadline" ] || { cat "$WORK/status.err" "$WORK/check.err" >&2; fail "$n: status shows no punched edge to c"; }
        sleep 0.2
    done
    for p in "$pa" "$pb" "$pc"; do wait_pid "$p" 60 || fail "$n: peer $p exited with $?"; done
    h1=$(json_field "$WORK/${n}a.log" done hash)
    [ -n "$h1" ] || fail "$n: a printed no final hash"
    for x in a b c; do
        [ "$(count_events "$WORK/$n$x.log" step)" -eq 20 ] || fail "$n$x did not complete 20 steps"
        [ "$(json_field "$WORK/$n$x.log" done hash)" = "$h1" ] || fail "$n$x hash differs"
        [ "$(json_field "$WORK/$n$x.log" step world_size)" = 3 ] || fail "$n$x world size is not 3"
    done
    grep -q "rendezvous: .* punches to" "$WORK/master.log" || fail "$n: the master arranged no punch"
    kill -INT "$MASTER_PID"
    wait_pid "$MASTER_PID" 10 || fail "$n: master exited with $? on SIGINT"
    cp "$WORK/master.log" "$WORK/master-$n.log"
}

PEER_FLAGS=()
run_punch o
PEER_FLAGS=(--key-file "$WORK/run.key")
run_punch k --key-file "$WORK/run.key" --encrypt
grep -q "traffic is encrypted" "$WORK/master-k.log" || fail "k: the master did not encrypt"
echo "ok: a peer that cannot be dialled is reached by a punch, open and keyed+encrypted; 20 all-reduces with one hash"
