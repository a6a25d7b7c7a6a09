#!/usr/bin/env bash
# bandwidth_vs_iperf3.sh - does `pccl bench-bandwidth` (the probe pcclOptimizeTopology uses) agree
# with iperf3 on the same link? Interleaved: REPS x (pccl upload+download, iperf3 forward, iperf3
# reverse), medians, ratio pccl / iperf3 per direction. Agreement required: within TOLERANCE (15%).
#
# usage: scripts/netns/bandwidth_vs_iperf3.sh [BIN_DIR]     (root; needs iperf3 and iproute2)
# Environment: LINK=veth (default: two namespaces joined by one veth pair, 10.66.0.1 <-> 10.66.0.2)
#              or LINK=lo (loopback inside one namespace); RATE=MBPS shapes the veth with HTB in both
#              directions (default: unshaped); SECONDS_EACH (3); REPS (3); TOLERANCE (0.15).
# Exit 0 when both directions agree within TOLERANCE, 1 otherwise.
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
BIN=${1:-${PCCL_BIN:-$ROOT/build/bin}}
PCCL="$BIN/pccl"
LINK=${LINK:-veth}
RATE=${RATE:-}
SECS=${SECONDS_EACH:-3}
REPS=${REPS:-3}
TOL=${TOLERANCE:-0.15}
. "$HERE/netns_lib.sh"
WORK=$(mktemp -d /tmp/pcclt-iperf.XXXXXX)
trap 'netns_cleanup; rm -rf "$WORK"' EXIT
trap 'exit 1' INT TERM
die() { echo "FAIL: $*" >&2; exit 1; }

[ -x "$PCCL" ] || die "no pccl binary at $PCCL"
command -v iperf3 > /dev/null || die "iperf3 not installed (apt-get install iperf3)"
A="pcclt${NETNS_TAG}a"
B="pcclt${NETNS_TAG}b"
if [ "$LINK" = lo ]; then
    netns_add "$A" || die "ip netns add"
    B=$A
    SRV=127.0.0.1
else
    netns_add "$A" || die "ip netns add"
    netns_add "$B" || die "ip netns add"
    ip link add eth0 netns "$A" type veth peer name eth0 netns "$B" || die "veth"
    ip -n "$A" addr add "$NETNS_SUBNET.1/24" dev eth0
    ip -n "$B" addr add "$NETNS_SUBNET.2/24" dev eth0
    ip -n "$A" link set eth0 up
    ip -n "$B" link set eth0 up
    SRV=$NETNS_SUBNET.2
    if [ -n "$RATE" ]; then
        for ns in "$A" "$B"; do
            tc -n "$ns" qdisc add dev eth0 root handle 1: htb default 10 || die "tc"
            tc -n "$ns" class add dev eth0 parent 1: classid 1:10 htb rate "${RATE}mbit" ceil "${RATE}mbit" \
                burst 256k cburst 256k quantum 60000 || die "tc class"
            tc -n "$ns" qdisc add dev eth0 parent 1:10 handle 10: pfifo limit 10000
        done
    fi
fi

ip netns exec "$B" "$PCCL" bench-bandwidth --server --listen "$SRV:48150" > "$WORK/pccl_server.log" 2>&1 &
NETNS_PIDS+=($!)
ip netns exec "$B" iperf3 -s -B "$SRV" -p 5201 > "$WORK/iperf_server.log" 2>&1 &
NETNS_PIDS+=($!)
sleep 0.5

: > "$WORK/results.txt"
for r in $(seq 1 "$REPS"); do
    ip netns exec "$A" "$PCCL" bench-bandwidth --connect "$SRV:48150" --seconds "$SECS" --json 2> /dev/null \
        > "$WORK/pccl.json" || die "pccl bench-bandwidth failed (rep $r)"
    python3 -c 'import json,sys; o=json.load(open(sys.argv[1])); print("pccl up", o["upload"]["mbps"]); print("pccl down", o["download"]["mbps"])' \
        "$WORK/pccl.json" >> "$WORK/results.txt"
    for dir in up down; do
        flag=""
        [ "$dir" = down ] && flag=-R
        ip netns exec "$A" iperf3 -c "$SRV" -p 5201 -t "$SECS" $flag -J > "$WORK/iperf.json" 2> /dev/null \
            || die "iperf3 $dir failed (rep $r)"
        # receiver-side rate, like the pccl probe (bytes received over the receive window)
        python3 -c 'import json,sys; o=json.load(open(sys.argv[1])); print("iperf3", sys.argv[2], o["end"]["sum_received"]["bits_per_second"] / 1e6)' \
            "$WORK/iperf.json" "$dir" >> "$WORK/results.txt"
    done
done

python3 - "$WORK/results.txt" "$TOL" "$LINK" "${RATE:-unshaped}" "$SECS" "$REPS" <<'PY'
import statistics, sys
tol = float(sys.argv[2])
v = {}
for line in open(sys.argv[1]):
    tool, d, x = line.split()
    v.setdefault((tool, d), []).append(float(x))
print(f"link: {sys.argv[3]} ({sys.argv[4]}), {sys.argv[5]} s per measurement, {sys.argv[6]} interleaved repetitions")
ok = True
for d in ("up", "down"):
    p, i = statistics.median(v[("pccl", d)]), statistics.median(v[("iperf3", d)])
    ratio = p / i
    good = abs(ratio - 1) <= tol
    ok &= good
    print(f"{d:5s} pccl bench-bandwidth median {p:9.1f} Mbit/s  (runs: {', '.join(f'{x:.0f}' for x in v[('pccl', d)])})")
    print(f"{'':5s} iperf3 median               {i:9.1f} Mbit/s  (runs: {', '.join(f'{x:.0f}' for x in v[('iperf3', d)])})")
    print(f"{'':5s} ratio pccl/iperf3 {ratio:.3f}: {'PASS' if good else 'FAIL'} (tolerance {tol * 100:.0f}%)")
print("RESULT: " + ("PASS" if ok else "FAIL"))
sys.exit(0 if ok else 1)
PY
