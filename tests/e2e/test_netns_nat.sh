#!/usr/bin/env bash
# A peer behind NAT with a port forward, in one run with peers outside (one of them on the master's host over
# loopback). Namespaces: "out" (10.66.0.2: the master and two peers, p1 joined over 127.0.0.1, p2 over
# 10.66.0.2), "rtr" (the NAT router: public 10.66.0.1, private 10.66.0.129; MASQUERADE outbound, DNAT of its public
# port 50000 to the NAT peer's fixed p2p port 40000) and "lan" (10.66.0.130, default route via the router). The
# NAT peer joins with --p2p-port 40000 --advertise 10.66.0.1:50000; the master sees it as 10.66.0.1 (masqueraded)
# with another source port, so only the advertised address gets its neighbours through. Every all-reduce is
# checked (synthetic workload) and the hashes agree. Skips (exit 0) only when namespaces, veth or iptables NAT
# cannot be used here (not root, a kernel or container without them).
# usage: tests/e2e/test_netns_nat.sh BIN_DIR
set -u
BIN=${1:?usage: $0 BIN_DIR}
PCCL="$BIN/pccl"
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
. "$ROOT/scripts/netns/netns_lib.sh"
WORK=$(mktemp -d /tmp/pccl-nat.XXXXXX)
trap 'netns_cleanup; [ "${KEEP_WORK:-0}" = 1 ] && echo "logs kept in $WORK" || rm -rf "$WORK"' EXIT
fail() {
    echo "FAIL: $*" >&2
    for f in "$WORK"/*.log "$WORK"/*.err; do [ -s "$f" ] && { echo "--- $f (tail)"; tail -n 15 "$f"; } >&2; done
    exit 1
}
if ! reason=$(netns_check); then echo "SKIP: network namespaces unavailable: $reason"; exit 0; fi
command -v iptables > /dev/null || { echo "SKIP: iptables not installed (scripts/deps.sh installs it)"; exit 0; }

OUT="pcclt${NETNS_TAG}out" RTR="pcclt${NETNS_TAG}rtr" LAN="pcclt${NETNS_TAG}lan"
S=$NETNS_SUBNET
netns_add "$OUT" && netns_add "$RTR" && netns_add "$LAN" || fail "cannot create the namespaces"
ip link add pub netns "$RTR" type veth peer name eth0 netns "$OUT" || fail "veth out"
ip link add priv netns "$RTR" type veth peer name eth0 netns "$LAN" || fail "veth lan"
ip -n "$RTR" addr add "$S.1/25" dev pub && ip -n "$RTR" addr add "$S.129/25" dev priv
ip -n "$OUT" addr add "$S.2/25" dev eth0 && ip -n "$LAN" addr add "$S.130/25" dev eth0
for l in "$RTR pub" "$RTR priv" "$OUT eth0" "$LAN eth0"; do set -- $l; ip -n "$1" link set "$2" up; done
ip -n "$LAN" route add default via "$S.129" || fail "lan default route"
ip netns exec "$RTR" sysctl -qw net.ipv4.ip_forward=1 || fail "ip_forward"
if ! err=$(ip netns exec "$RTR" iptables -t nat -A POSTROUTING -o pub -j MASQUERADE 2>&1) ||
   ! err=$(ip netns exec "$RTR" iptables -t nat -A PREROUTING -i pub -p tcp --dport 50000 \
           -j DNAT --to-destination "$S.130:40000" 2>&1); then
    echo "SKIP: iptables NAT unavailable: $err"
    exit 0
fi

# run NS NAME ARGS...: a process in NS, output in $WORK/NAME.log and .err, its pid in LAST_PID
run() {
    local ns=$1 name=$2; shift 2
    ip netns exec "$ns" "$@" > "$WORK/$name.log" 2> "$WORK/$name.err" &
    LAST_PID=$!
    NETNS_PIDS+=("$LAST_PID")
}
# wait_exit PID SECONDS: its exit status; fails on timeout
wait_exit() {
    local i
    for i in $(seq 1 $(($2 * 20))); do
        kill -0 "$1" 2>/dev/null || { wait "$1"; return $?; }
        sleep 0.05
    done
    fail "process $1 still running after $2 s"
}
# json_last FILE EVENT FIELD
json_last() {
    python3 - "$@" <<'PY'
import json, sys
val = ''
for line in open(sys.argv[1]):
    if line.startswith('{'):
        o = json.loads(line)
        if o.get('event') == sys.argv[2] and sys.argv[3] in o: val = o[sys.argv[3]]
print(val)
PY
}

run "$OUT" master env PCCL_LOG_LEVEL=info "$PCCL" master --listen 0.0.0.0:0 --admin 127.0.0.1:0
MASTER_PID=$LAST_PID
PORT=$(netns_master_port "$WORK/master.log") || fail "master did not start"
args=(--json --workload synthetic --steps 15 --size 200000 --min-world 3)
run "$OUT" p1 "$PCCL" join --master "127.0.0.1:$PORT" "${args[@]}"; p1=$LAST_PID
run "$OUT" p2 "$PCCL" join --master "$S.2:$PORT" "${args[@]}"; p2=$LAST_PID
run "$LAN" nat "$PCCL" join --master "$S.2:$PORT" --p2p-port 40000 --advertise "$S.1:50000" "${args[@]}"
pn=$LAST_PID
for p in "$p1" "$p2" "$pn"; do wait_exit "$p" 90 || fail "peer $p exited with $?"; done
h=$(json_last "$WORK/p1.log" done hash)
[ -n "$h" ] || fail "p1 printed no final hash"
for n in p1 p2 nat; do
    [ "$(grep -c '"event":"step"' "$WORK/$n.log")" -eq 15 ] || fail "$n did not complete 15 steps"
    [ "$(json_last "$WORK/$n.log" done hash)" = "$h" ] || fail "$n hash differs"
    [ "$(json_last "$WORK/$n.log" step world_size)" = 3 ] || fail "$n world size is not 3"
done
# the master saw the NAT peer's masqueraded address and registered it at the advertised one
grep -q "($S.1:50000)" "$WORK/master.err" "$WORK/master.log" || fail "master did not register the advertised address"
kill -INT "$MASTER_PID"
wait_exit "$MASTER_PID" 10 || fail "master exited with $? on SIGINT"
echo "ok: a peer behind NAT (advertised $S.1:50000 -> $S.130:40000) and two outside peers, 15 checked all-reduces"
