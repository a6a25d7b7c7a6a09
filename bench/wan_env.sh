# bench/wan_env.sh - the WAN emulation of bench/wan.sh and bench/compress.sh, sourced (not run) after the caller set
# BIN, NSP, PEERS, RATE, LOSS, MTU and CC (see bench/wan.sh for their meaning and for the two emulations). It sets
# WORK (a scratch directory), MASTER_IP, MASTER_NS (the command prefix that runs the master in its namespace),
# EMU (a description) and HAVE_NETEM; peer I runs under `ip netns exec $NSP-pI` at 10.77.0.I+1. A trap removes
# everything on exit: the namespaces with whatever runs in them, the links, the emulator, MPID (the caller's
# master, when it sets it), WORK.
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
