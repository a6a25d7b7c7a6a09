#!/usr/bin/env bash
# TCP hole punching through the master's rendezvous (docs/nat.md), on loopback: peer c advertises a port nobody
# listens on, so every direct dial of it fails and the master's reachability probe finds it unreachable; its
# ring predecessor asks the master for a rendezvous and both sides dial each other's observed address (c's
# control connection leaves from its p2p port, so that is its real listening port). The run forms, every
# all-reduce of the synthetic workload completes with one hash, /v1/status shows c unreachable with its observed
# address, the others reachable, and an edge to c that was punched.
. "$(dirname "$0")/lib.sh"

closed=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
start_master
start_peer a --workload synthetic --steps 20 --size 100000 --step-delay 100 --min-world 3; pa=$LAST_PID
start_peer b --workload synthetic --steps 20 --size 100000 --step-delay 100 --min-world 3; pb=$LAST_PID
start_peer c --workload synthetic --steps 20 --size 100000 --step-delay 100 --min-world 3 \
    --advertise "127.0.0.1:$closed"; pc=$LAST_PID

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
}
deadline=$((SECONDS + 30))
until punched 2> "$WORK/check.err"; do
    [ "$SECONDS" -lt "$deadline" ] || { cat "$WORK/status.err" "$WORK/check.err" >&2; fail "status shows no punched edge to c"; }
    sleep 0.2
done
for p in "$pa" "$pb" "$pc"; do wait_pid "$p" 60 || fail "peer $p exited with $?"; done
h1=$(json_field "$WORK/a.log" done hash)
[ -n "$h1" ] || fail "a printed no final hash"
for n in a b c; do
    [ "$(count_events "$WORK/$n.log" step)" -eq 20 ] || fail "$n did not complete 20 steps"
    [ "$(json_field "$WORK/$n.log" done hash)" = "$h1" ] || fail "$n hash differs"
    [ "$(json_field "$WORK/$n.log" step world_size)" = 3 ] || fail "$n world size is not 3"
done
grep -q "rendezvous: .* punches to" "$WORK/master.log" || fail "the master arranged no punch"
echo "ok: a peer that cannot be dialled is reached by a punch; 20 all-reduces with one hash"
