#!/usr/bin/env bash
# bench/wan.sh - concurrent pccl all-reduces under WAN emulation (called by run.sh --wan).
#
# usage: bench/wan.sh BIN_DIR REPS "CONCS"     (root; prints RESULT lines on stdout)
#        WAN_POOL=1 bench/wan.sh BIN_DIR REPS "POOLS"   one all-reduce per repetition with a pool of
#        P connections (striped over all P: mode=wanpool conc=P); WAN_GLOO=1 adds Gloo's ring
#        (bench/gloo_allreduce.cc, one rank per namespace, same shaping) as mode=wanpool impl=gloo
#        WAN_COLL=KIND bench/wan.sh BIN_DIR REPS "POOLS"   one out-of-place broadcast, all_gather or
#        reduce_scatter per repetition (bench/pccl_coll.c; peer 0 is the broadcast root) with a pool
#        of P: mode=wancoll coll=KIND conc=P. WAN_LINK=1 adds the time of sending WAN_BYTES once from
#        peer 0 to peer 1 over S fresh TCP streams for each S of POOLS (pccl_coll send/sink):
#        mode=wanlink impl=tcp conc=S
# env:   WAN_PEERS (4), WAN_BYTES (16 MiB per op), WAN_RATE (1gbit per link and direction; k/m/gbit),
#        WAN_LOSS (0%), WAN_DELAY (see below: 40 ms peer-to-peer RTT by default on either path),
#        WAN_MTU (9000, wanemu path only), WAN_CC (TCP congestion control in the namespaces, e.g.
#        cubic; default: the kernel's, named in the wanenv line), WAN_TAG (adds scenario=TAG to every
#        RESULT line, so run.sh can report several settings apart), PCCL_BENCH_QUANT (quantize the all-reduces, e.g.
#        minmax:uint8; tags the RESULT lines), WAN_PREFIX (pcclb: the prefix of every namespace and link
#        name below, at most 6 characters, so runs with different prefixes do not collide), WAN_MASTER_LOG
#        (the master's PCCL_LOG_LEVEL; debug adds algo=NAME:COUNT,... to the RESULT lines: the algorithms
#        the master commenced, docs/algorithms.md)
#
# Two emulations, chosen by probing the kernel:
#
# netem (the kernel has sch_netem): a bridge pcclb-br0 (10.77.0.254/24, the master's side) and one
# network namespace pcclb-pI per peer joined by a veth pair (10.77.0.I+1). Both ends of every veth
# get "tc netem delay WAN_DELAY rate WAN_RATE loss WAN_LOSS", so a peer-to-peer path crosses 4 netem
# queues: WAN_DELAY (default 10ms) is per veth end, RTT = 4 x WAN_DELAY, and WAN_LOSS applies at each
# of those 4 queues.
#
# wanemu (no sch_netem, e.g. Firecracker guests): bench/wanemu.c, a userspace forwarder over TUN
# interfaces. Every endpoint, master included, is a namespace (pcclb-pI = 10.77.0.I+1, pcclb-m =
# 10.77.0.254) whose only interface is a TUN (pcclb-tI, pcclb-tm) routing 10.77.0.0/24 into wanemu.
# WAN_DELAY (default 20ms) is one way, RTT = 2 x WAN_DELAY; WAN_RATE is a serialization queue on the
# sender's uplink and on the receiver's downlink (drop-tail at one bandwidth-delay product); WAN_LOSS
# is applied once per packet. WAN_MTU 9000: at 1500 the forwarder (one thread sharing 2 cores with
# the peers) tops out near 2 Gbit/s in total, at 9000 near 5 Gbit/s (bench/analysis.md).
#
# Everything is removed on exit (trap), also on failure; processes are stopped by PID.
set -euo pipefail
BIN=$1 REPS=$2 CONCS=$3
NSP=${WAN_PREFIX:-pcclb} # names of the namespaces and links: another prefix lets two emulations run side by side
PEERS=${WAN_PEERS:-4}
BYTES=${WAN_BYTES:-16777216}
RATE=${WAN_RATE:-1gbit}
LOSS=${WAN_LOSS:-0%}
MTU=${WAN_MTU:-9000}
CC=${WAN_CC:-$(sysctl -n net.ipv4.tcp_congestion_control)}
TAG=${WAN_TAG:+ scenario=$WAN_TAG}
grep -qw "$CC" /proc/sys/net/ipv4/tcp_available_congestion_control ||
    { echo "wan.sh: WAN_CC=$CC is not available in this kernel" >&2; exit 2; }
. "$(dirname "$0")/wan_env.sh"
echo "RESULT impl=env mode=wanenv emu=${EMU// /_}$TAG"

WMODE=conc RMODE=wan
[ "${WAN_POOL:-0}" = 1 ] && WMODE=pool RMODE=wanpool
PEER_CMD=("$BIN/pccl_allreduce" peer) # then: MASTER_IP PORT RANK PEERS MODE BYTES REPS C
if [ -n "${WAN_COLL:-}" ]; then
    [ -x "$BIN/pccl_coll" ] || { echo "wan.sh: WAN_COLL=$WAN_COLL but no $BIN/pccl_coll" >&2; exit 1; }
    PEER_CMD=("$BIN/pccl_coll" peer) WMODE=$WAN_COLL RMODE=wancoll TAG="$TAG coll=$WAN_COLL"
fi
# summarize IMPL C: RESULT line from the peers' TIMES lines (time = max over ranks, median over reps)
summarize() {
    cat "$WORK"/p*.out | python3 -c '
import sys, statistics
impl, mode, c, b = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
rows = [list(map(float, l.split()[2:])) for l in sys.stdin if l.startswith("TIMES")]
per_rep = sorted(max(col) for col in zip(*rows))
med = statistics.median(per_rep)
q = " quant=" + sys.argv[5] if sys.argv[5] else ""
ops = c if mode == "wan" else 1
print(f"RESULT impl={impl} mode={mode} peers={len(rows)} bytes={b} conc={c} reps={len(per_rep)} median_s={med:.6f} "
      f"min_s={per_rep[0]:.6f} max_s={per_rep[-1]:.6f} GBps={ops * b / med / 1e9:.5f}{q}{sys.argv[6]}")' \
        "$1" "$RMODE" "$2" "$BYTES" "${PCCL_BENCH_QUANT:-}" "$TAG"
}

for c in $CONCS; do
    # a fresh master per point
    "${MASTER_NS[@]}" env PCCL_LOG_LEVEL="${WAN_MASTER_LOG:-${PCCL_LOG_LEVEL:-info}}" "$BIN/pccl_allreduce" master \
        "$MASTER_IP" >"$WORK/master.out" 2>"$WORK/master.err" &
    MPID=$!
    for _ in $(seq 50); do grep -q PORT "$WORK/master.out" && break; sleep 0.1; done
    PORT=$(awk '/PORT/ {print $2}' "$WORK/master.out")
    [ -n "$PORT" ] || { echo "wan.sh: master did not start" >&2; exit 1; }
    echo "[$(date -u +%H:%M:%S)] wan: $PEERS peers, $c x $BYTES B, $EMU" >&2
    pids=()
    for i in $(seq 0 $((PEERS - 1))); do
        timeout 900 ip netns exec "$NSP-p$i" "${PEER_CMD[@]}" "$MASTER_IP" "$PORT" "$i" "$PEERS" "$WMODE" \
            "$BYTES" "$REPS" "$c" >"$WORK/p$i.out" 2>"$WORK/p$i.err" &
        pids+=($!)
    done
    ok=1
    for p in "${pids[@]}"; do wait "$p" || ok=0; done
    if [ "$ok" = 1 ]; then
        algos=$(grep -o 'peers, [a-z]*$' "$WORK/master.err" | awk '{print $2}' | sort | uniq -c |
            awk '{printf "%s%s:%s", s, $2, $1; s = ","}')
        # the slowest link the master's probes measured (PCCL_BENCH_OPTIMIZE=1), from its solve's log line
        probe=$(grep -o 'topology solved: .*' "$WORK/master.err" | sed 's/topology solved: //' | python3 -c '
import json, sys
v = [x for l in sys.stdin for row in json.loads(l)["matrix_mbps"] for x in row if x > 0]
print(f"{min(v):.0f}" if v else "")' 2>/dev/null || true)
        TAG="$TAG${algos:+ algo=$algos}${probe:+ probe_min_mbps=$probe}" summarize pccl "$c"
    else
        echo "RESULT impl=pccl mode=$RMODE peers=$PEERS bytes=$BYTES conc=$c status=FAILED$TAG"
        tail -n 3 "$WORK"/p*.err >&2 || true
    fi
    kill -TERM "$MPID" 2>/dev/null || true
    wait "$MPID" 2>/dev/null || true
    MPID=
done

if [ "${WAN_LINK:-0}" = 1 ]; then # the floor of a broadcast: the same bytes once over one link
    ip netns exec "$NSP-p1" "$BIN/pccl_coll" sink 10.77.0.2 >"$WORK/sink.out" 2>"$WORK/sink.err" &
    MPID=$! # cleanup stops it as it stops a master
    for _ in $(seq 50); do grep -q PORT "$WORK/sink.out" && break; sleep 0.1; done
    SPORT=$(awk '/PORT/ {print $2}' "$WORK/sink.out")
    [ -n "$SPORT" ] || { echo "wan.sh: the sink did not start" >&2; exit 1; }
    for c in $CONCS; do
        echo "[$(date -u +%H:%M:%S)] wan: one link, $BYTES B over $c streams, $EMU" >&2
        rm -f "$WORK"/p*.out
        if timeout 900 ip netns exec "$NSP-p0" "$BIN/pccl_coll" send 10.77.0.2 "$SPORT" "$c" "$BYTES" "$REPS" \
            >"$WORK/p0.out" 2>"$WORK/p0.err"; then
            RMODE=wanlink TAG=${WAN_TAG:+ scenario=$WAN_TAG} summarize tcp "$c"
        else
            echo "RESULT impl=tcp mode=wanlink peers=2 bytes=$BYTES conc=$c status=FAILED$TAG"
            tail -n 3 "$WORK/p0.err" >&2 || true
        fi
    done
    kill -TERM "$MPID" 2>/dev/null || true
    wait "$MPID" 2>/dev/null || true
    MPID=
fi

if [ "${WAN_GLOO:-0}" = 1 ]; then
    [ -x "$BIN/gloo_allreduce" ] || { echo "wan.sh: WAN_GLOO=1 but no $BIN/gloo_allreduce (libgloo-dev)" >&2; exit 1; }
    echo "[$(date -u +%H:%M:%S)] wan: gloo ring, $PEERS peers, $BYTES B, $EMU" >&2
    rm -f "$WORK"/p*.out
    mkdir -p "$WORK/gloo-store" # the ranks rendezvous through files: namespaces share the file system
    pids=()
    for i in $(seq 0 $((PEERS - 1))); do
        timeout 900 ip netns exec "$NSP-p$i" "$BIN/gloo_allreduce" peer "10.77.0.$((i + 1))" "$i" "$PEERS" \
            "$WORK/gloo-store" "$BYTES" "$REPS" >"$WORK/p$i.out" 2>"$WORK/p$i.err" &
        pids+=($!)
    done
    ok=1
    for p in "${pids[@]}"; do wait "$p" || ok=0; done
    if [ "$ok" = 1 ]; then
        RMODE=wanpool summarize gloo 1
    else
        echo "RESULT impl=gloo mode=wanpool peers=$PEERS bytes=$BYTES conc=1 status=FAILED$TAG"
        tail -n 3 "$WORK"/p*.err >&2 || true
    fi
fi
