#!/usr/bin/env bash
# Host names and IPv6 end to end: a master on [::1] with peers dialling it over ::1 and by name; then a dual-stack
# master (0.0.0.0) with one peer over 127.0.0.1, one over [::1] and one by name with a fixed p2p port (--p2p-port):
# every all-reduce is checked (synthetic workload), the hashes agree, and the admin port ([::1]) shows the peers'
# addresses of both families. Skips (exit 0) only when this host has no IPv6 loopback.
. "$(dirname "$0")/lib.sh"
if ! python3 -c 'import socket; s = socket.socket(socket.AF_INET6); s.bind(("::1", 0))' 2>/dev/null; then
    echo "SKIP: no IPv6 loopback (::1) here"
    exit 0
fi

# check_run PREFIX N: N peers PREFIX1..N finished 20 steps with one hash and a world of N
check_run() {
    local prefix=$1 n=$2 i h1
    h1=$(json_field "$WORK/${prefix}1.log" done hash)
    [ -n "$h1" ] || fail "${prefix}1 printed no final hash"
    for i in $(seq 1 "$n"); do
        [ "$(count_events "$WORK/$prefix$i.log" step)" -eq 20 ] || fail "$prefix$i did not complete 20 steps"
        [ "$(json_field "$WORK/$prefix$i.log" done hash)" = "$h1" ] || fail "$prefix$i hash differs"
        [ "$(json_field "$WORK/$prefix$i.log" step world_size)" = "$n" ] || fail "$prefix$i world size is not $n"
    done
}

# 1. IPv6 only: master and admin on ::1
MASTER_LISTEN='[::1]:0' MASTER_ADMIN='[::1]:0' start_master
grep -q 'listening on \[::1\]:' "$WORK/master.log" || fail "master does not say it listens on [::1]"
MASTER_HOST='[::1]' start_peer a1 --workload synthetic --steps 20 --size 100000 --min-world 2; pa1=$LAST_PID
MASTER_HOST='[::1]' start_peer a2 --workload synthetic --steps 20 --size 100000 --min-world 2; pa2=$LAST_PID
wait_pid "$pa1" 60 || fail "peer a1 exited with $?"
wait_pid "$pa2" 60 || fail "peer a2 exited with $?"
check_run a 2
# the peers are done: a reachable master without peers is exit 6
"$PCCL" status --admin "[::1]:$APORT" --json > "$WORK/status6.json"; rc=$?
[ "$rc" -eq 6 ] || fail "status over [::1] failed (exit $rc)"
kill -INT "$MASTER_PID"
wait_pid "$MASTER_PID" 10 || fail "IPv6 master exited with $? on SIGINT"

# 2. dual-stack master: peers over IPv4, IPv6 and a host name, one on a fixed p2p port
MASTER_LISTEN='0.0.0.0:0' MASTER_ADMIN='[::1]:0' start_master
fixed=$(python3 -c 'import socket; s = socket.socket(socket.AF_INET6); s.bind(("::", 0)); print(s.getsockname()[1])')
MASTER_HOST=127.0.0.1 start_peer b1 --workload synthetic --steps 20 --size 100000 --step-delay 100 --min-world 3; pb1=$LAST_PID
MASTER_HOST='[::1]' start_peer b2 --workload synthetic --steps 20 --size 100000 --step-delay 100 --min-world 3; pb2=$LAST_PID
MASTER_HOST=localhost start_peer b3 --workload synthetic --steps 20 --size 100000 --step-delay 100 --min-world 3 --p2p-port "$fixed"
pb3=$LAST_PID
# the admin port lists the three with their addresses while they run (within 30 s: a loaded or sanitized build
# registers them slowly)
shows_all() {
    # any verdict but unreachable (3): peers still being accepted read "no peers" (6)
    "$PCCL" status --admin "[::1]:$APORT" --json > "$WORK/status.json" 2> "$WORK/status.err"
    [ $? -ne 3 ] || return 1
    python3 - "$WORK/status.json" "$fixed" <<'PY'
import json, sys
peers = json.load(open(sys.argv[1]))["peers"]
addrs = sorted(p["address"] for p in peers)
assert len(peers) == 3 and "::1" in addrs and "127.0.0.1" in addrs, addrs
assert any(p.get("p2p_port") == int(sys.argv[2]) for p in peers), peers
PY
}
deadline=$((SECONDS + 30))
until shows_all 2> "$WORK/check.err"; do
    [ "$SECONDS" -lt "$deadline" ] || { cat "$WORK/status.err" "$WORK/check.err" >&2; fail "status does not show the peers' addresses"; }
    sleep 0.1
done
for p in "$pb1" "$pb2" "$pb3"; do wait_pid "$p" 60 || fail "peer $p exited with $?"; done
check_run b 3
kill -INT "$MASTER_PID"
wait_pid "$MASTER_PID" 10 || fail "dual-stack master exited with $? on SIGINT"
echo "ok: IPv6 master, and a dual-stack master with IPv4, IPv6 and named peers (fixed p2p port $fixed)"
