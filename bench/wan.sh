#!/usr/bin/env bash
# bench/wan.sh - concurrent pccl all-reduces under WAN emulation (called by run.sh --wan).
#
# usage: bench/wan.sh BIN_DIR REPS "CONCS"     (root; prints RESULT lines on stdout)
# env:   WAN_PEERS (4), WAN_BYTES (16 MiB per op), WAN_DELAY (10ms per veth end,
#        i.e. 40 ms peer-to-peer RTT), WAN_RATE (1gbit per veth end), WAN_LOSS (0%),
#        PCCL_BENCH_QUANT (quantize the all-reduces, e.g. minmax:uint8; tags the RESULT lines)
#
# Builds a bridge pcclb-br0 (10.77.0.254/24, the master's side) and one network
# namespace pcclb-pI per peer joined by a veth pair (10.77.0.I+1). Both ends of
# every veth get "tc netem delay WAN_DELAY rate WAN_RATE", so a peer-to-peer
# path crosses 4 netem queues (40 ms RTT) and each peer's link is 1 Gbit/s per
# direction. Everything is removed on exit (trap), also on failure.
set -euo pipefail
BIN=$1 REPS=$2 CONCS=$3
PEERS=${WAN_PEERS:-4}
BYTES=${WAN_BYTES:-16777216}
DELAY=${WAN_DELAY:-10ms}
RATE=${WAN_RATE:-1gbit}
LOSS=${WAN_LOSS:-0%}
BR=pcclb-br0
WORK=$(mktemp -d /tmp/pcclb-wan-XXXXXX)
MPID=

cleanup() {
    [ -n "$MPID" ] && kill -TERM "$MPID" 2>/dev/null && wait "$MPID" 2>/dev/null
    for i in $(seq 0 $((PEERS - 1))); do
        ip netns pids "pcclb-p$i" 2>/dev/null | xargs -r kill -9 2>/dev/null || true
        ip netns del "pcclb-p$i" 2>/dev/null || true
        ip link del "pcclb-v$i" 2>/dev/null || true
    done
    ip link del "$BR" 2>/dev/null || true
    rm -rf "$WORK"
}
trap cleanup EXIT INT TERM

ip link add "$BR" type bridge
ip addr add 10.77.0.254/24 dev "$BR"
ip link set "$BR" up
for i in $(seq 0 $((PEERS - 1))); do
    ns=pcclb-p$i
    ip netns add "$ns"
    ip link add "pcclb-v$i" type veth peer name "pcclb-e$i" netns "$ns"
    ip link set "pcclb-v$i" master "$BR" up
    ip -n "$ns" addr add "10.77.0.$((i + 1))/24" dev "pcclb-e$i"
    ip -n "$ns" link set lo up
    ip -n "$ns" link set "pcclb-e$i" up
    if [ "$i" = 0 ]; then # probe once: some kernels (e.g. Firecracker guests) lack sch_netem
        if tc qdisc add dev "pcclb-v$i" root netem delay "$DELAY" rate "$RATE" loss "$LOSS" limit 100000 2>/dev/null; then
            tc qdisc del dev "pcclb-v$i" root
            QDISC=(netem delay "$DELAY" rate "$RATE" loss "$LOSS" limit 100000)
            EMU="netem delay $DELAY per veth end (RTT 4x), rate $RATE, loss $LOSS"
        else
            echo "wan.sh: no sch_netem in this kernel: rate limit only (tbf $RATE), NO added delay" >&2
            QDISC=(tbf rate "$RATE" burst 1mb latency 100ms)
            EMU="tbf rate $RATE only (kernel has no sch_netem: no delay emulated)"
        fi
    fi
    tc qdisc add dev "pcclb-v$i" root "${QDISC[@]}"
    ip netns exec "$ns" tc qdisc add dev "pcclb-e$i" root "${QDISC[@]}"
done
echo "RESULT impl=env mode=wanenv emu=${EMU// /_}"

for c in $CONCS; do
    # a fresh master per point
    "$BIN/pccl_allreduce" master 10.77.0.254 >"$WORK/master.out" 2>"$WORK/master.err" &
    MPID=$!
    for _ in $(seq 50); do grep -q PORT "$WORK/master.out" && break; sleep 0.1; done
    PORT=$(awk '/PORT/ {print $2}' "$WORK/master.out")
    [ -n "$PORT" ] || { echo "wan.sh: master did not start" >&2; exit 1; }
    echo "[$(date -u +%H:%M:%S)] wan: $PEERS peers, $c x $BYTES B, $EMU" >&2
    pids=()
    for i in $(seq 0 $((PEERS - 1))); do
        timeout 600 ip netns exec "pcclb-p$i" "$BIN/pccl_allreduce" peer 10.77.0.254 "$PORT" "$i" "$PEERS" conc \
            "$BYTES" "$REPS" "$c" >"$WORK/p$i.out" 2>"$WORK/p$i.err" &
        pids+=($!)
    done
    ok=1
    for p in "${pids[@]}"; do wait "$p" || ok=0; done
    if [ "$ok" = 1 ]; then
        cat "$WORK"/p*.out | python3 -c '
import sys, statistics
c, b = int(sys.argv[1]), int(sys.argv[2])
rows = [list(map(float, l.split()[2:])) for l in sys.stdin if l.startswith("TIMES")]
per_rep = sorted(max(col) for col in zip(*rows))
med = statistics.median(per_rep)
q = " quant=" + sys.argv[3] if sys.argv[3] else ""
print(f"RESULT impl=pccl mode=wan peers={len(rows)} bytes={b} conc={c} reps={len(per_rep)} median_s={med:.6f} "
      f"min_s={per_rep[0]:.6f} max_s={per_rep[-1]:.6f} GBps={c * b / med / 1e9:.5f}{q}")' "$c" "$BYTES" "${PCCL_BENCH_QUANT:-}"
    else
        echo "RESULT impl=pccl mode=wan peers=$PEERS bytes=$BYTES conc=$c status=FAILED"
        tail -n 3 "$WORK"/p*.err >&2 || true
    fi
    kill -TERM "$MPID" 2>/dev/null || true
    wait "$MPID" 2>/dev/null || true
    MPID=
done
