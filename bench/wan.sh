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
#        name below, at most 6 characters, so runs with different prefixes do not collide)
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
BR=$NSP-br0
WORK=$(mktemp -d /tmp/pcclb-wan-XXXXXX)
MPID= EMUPID=
MASTER_IP=10.77.0.254
MASTER_NS=() # command prefix that runs the master in its namespace (wanemu path)

ALLOWED_CC=$(sysctl -n net.ipv4.tcp_allowed_congestion_control)
cleanup() {
    sysctl -qw net.ipv4.tcp_allowed_congestion_control="$ALLOWED_CC" || true
    [ -n "$MPID" ] && kill -TERM "$MPID" 2>/dev/null && wait "$MPID" 2>/dev/null
    for ns in $NSP-m $(seq -f "$NSP-p%g" 0 $((PEERS - 1))); do # anything left in our namespaces is ours
        ip netns pids "$ns" 2>/dev/null | xargs -r kill -9 2>/dev/null || true
    done
    if [ -n "$EMUPID" ]; then # its counters are the evidence of queue drops and losses
        kill -TERM "$EMUPID" 2>/dev/null && wait "$EMUPID" 2>/dev/null
        cat "$WORK/wanemu.err" >&2 2>/dev/null || true
    fi
    for i in $(seq 0 $((PEERS - 1))); do
        ip netns del "$NSP-p$i" 2>/dev/null || true
        ip link del "$NSP-v$i" 2>/dev/null || true
    done
    ip netns del $NSP-m 2>/dev/null || true
    ip netns del $NSP-probe 2>/dev/null || true
    ip link del "$BR" 2>/dev/null || true
    rm -rf "$WORK"
}
trap cleanup EXIT INT TERM
# A namespace may only pick a congestion control from the global allowed list: add ours for the
# run (cleanup puts the list back).
grep -qw "$CC" <<<"$ALLOWED_CC" || sysctl -qw net.ipv4.tcp_allowed_congestion_control="$ALLOWED_CC $CC"

# to_mbit 1gbit -> 1000 (WAN_RATE is written in tc's units for the netem path)
to_mbit() {
    awk -v r="$1" 'BEGIN {
        if (!match(tolower(r), /^[0-9.]+/)) { print "wan.sh: cannot parse WAN_RATE " r > "/dev/stderr"; exit 1 }
        v = substr(r, 1, RLENGTH); u = tolower(substr(r, RLENGTH + 1))
        m["bit"] = 1e-6; m["kbit"] = 1e-3; m["mbit"] = 1; m["gbit"] = 1e3
        m["bps"] = 8e-6; m["kbps"] = 8e-3; m["mbps"] = 8; m["gbps"] = 8e3
        if (!(u in m)) { print "wan.sh: unknown rate unit in WAN_RATE " r > "/dev/stderr"; exit 1 }
        printf "%g\n", v * m[u] }'
}
# to_ms 20ms / 0.02s / 500us -> milliseconds
to_ms() {
    awk -v d="$1" 'BEGIN {
        if (!match(d, /^[0-9.]+/)) { print "wan.sh: cannot parse WAN_DELAY " d > "/dev/stderr"; exit 1 }
        v = substr(d, 1, RLENGTH); u = substr(d, RLENGTH + 1)
        m[""] = 1; m["ms"] = 1; m["s"] = 1e3; m["us"] = 1e-3
        if (!(u in m)) { print "wan.sh: unknown unit in WAN_DELAY " d > "/dev/stderr"; exit 1 }
        printf "%g\n", v * m[u] }'
}

# probe once: some kernels (e.g. Firecracker guests) lack sch_netem
ip netns add $NSP-probe
if tc -n $NSP-probe qdisc add dev lo root netem delay 1ms 2>/dev/null; then HAVE_NETEM=1; else HAVE_NETEM=0; fi
ip netns del $NSP-probe

if [ "$HAVE_NETEM" = 1 ]; then
    DELAY=${WAN_DELAY:-10ms}
    QDISC=(netem delay "$DELAY" rate "$RATE" loss "$LOSS" limit 100000)
    EMU="netem delay $DELAY per veth end (RTT 4x), rate $RATE, loss $LOSS, tcp $CC"
    ip link add "$BR" type bridge
    ip addr add "$MASTER_IP/24" dev "$BR"
    ip link set "$BR" up
    for i in $(seq 0 $((PEERS - 1))); do
        ns=$NSP-p$i
        ip netns add "$ns"
        ip netns exec "$ns" sysctl -qw net.ipv4.tcp_congestion_control="$CC"
        ip link add "$NSP-v$i" type veth peer name "$NSP-e$i" netns "$ns"
        ip link set "$NSP-v$i" master "$BR" up
        ip -n "$ns" addr add "10.77.0.$((i + 1))/24" dev "$NSP-e$i"
        ip -n "$ns" link set lo up
        ip -n "$ns" link set "$NSP-e$i" up
        tc qdisc add dev "$NSP-v$i" root "${QDISC[@]}"
        ip netns exec "$ns" tc qdisc add dev "$NSP-e$i" root "${QDISC[@]}"
    done
else
    [ -x "$BIN/wanemu" ] || { echo "wan.sh: no sch_netem and no $BIN/wanemu (build target wanemu)" >&2; exit 1; }
    DELAY=${WAN_DELAY:-20ms}
    DMS=$(to_ms "$DELAY")
    RMBIT=$(to_mbit "$RATE")
    EMU="wanemu delay $DELAY one way (RTT 2x), rate $RATE, loss $LOSS, mtu $MTU, tcp $CC"
    echo "wan.sh: no sch_netem in this kernel: userspace emulation ($EMU)" >&2
    links=(--link "$NSP-tm=$MASTER_IP")
    for i in $(seq 0 $((PEERS - 1))); do links+=(--link "$NSP-t$i=10.77.0.$((i + 1))"); done
    "$BIN/wanemu" "${links[@]}" --delay "$DMS" --rate "$RMBIT" --loss "$LOSS" --seed 1 \
        >"$WORK/wanemu.out" 2>"$WORK/wanemu.err" &
    EMUPID=$!
    for _ in $(seq 50); do grep -q READY "$WORK/wanemu.out" && break; sleep 0.1; done
    grep -q READY "$WORK/wanemu.out" || { echo "wan.sh: wanemu did not start" >&2; cat "$WORK/wanemu.err" >&2; exit 1; }
    for i in m $(seq 0 $((PEERS - 1))); do
        if [ "$i" = m ]; then ns=$NSP-m ip=$MASTER_IP; else ns=$NSP-p$i ip=10.77.0.$((i + 1)); fi
        ip netns add "$ns"
        ip link set "$NSP-t$i" netns "$ns" # the TUN moves; wanemu's fd stays attached to it
        ip netns exec "$ns" sysctl -qw net.ipv6.conf.all.disable_ipv6=1 # no router solicitations
        ip netns exec "$ns" sysctl -qw net.ipv4.tcp_congestion_control="$CC"
        ip -n "$ns" link set lo up
        ip -n "$ns" link set "$NSP-t$i" mtu "$MTU" up
        ip -n "$ns" addr add "$ip/24" dev "$NSP-t$i" # the /24 route points into wanemu
    done
    MASTER_NS=(ip netns exec $NSP-m)
fi
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
    "${MASTER_NS[@]}" "$BIN/pccl_allreduce" master "$MASTER_IP" >"$WORK/master.out" 2>"$WORK/master.err" &
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
        summarize pccl "$c"
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
