# netns_lib.sh - shared helpers for the network-namespace scenarios (sourced, not run).
#
# Every namespace created here is named pcclt<TAG>..., every address is in 10.66.0.0/24, and
# netns_cleanup (install it in a trap) kills the processes started here by PID, then every
# process left in our namespaces, then deletes the namespaces. Nothing is created in the root
# namespace: the veth pairs are created directly inside the namespaces.

NETNS_TAG=${NETNS_TAG:-$(( $$ % 100000 ))}
NETNS_LIST=()
NETNS_PIDS=()
NETNS_SUBNET=10.66.0

netns_cleanup() {
    local p ns
    for p in "${NETNS_PIDS[@]}"; do kill -TERM "$p" 2>/dev/null; done
    sleep 0.2
    for p in "${NETNS_PIDS[@]}"; do kill -KILL "$p" 2>/dev/null; done
    for p in "${NETNS_PIDS[@]}"; do wait "$p" 2>/dev/null; done
    for ns in "${NETNS_LIST[@]}"; do
        # anything still inside a namespace we created was started by us
        for p in $(ip netns pids "$ns" 2>/dev/null); do kill -KILL "$p" 2>/dev/null; done
    done
    for ns in "${NETNS_LIST[@]}"; do ip netns del "$ns" 2>/dev/null; done
    NETNS_LIST=()
    NETNS_PIDS=()
}

# netns_check: prints a reason and returns 1 when namespaces / veth / bridge / htb are unusable here.
netns_check() {
    local ns="pcclt${NETNS_TAG}chk" err
    [ "$(id -u)" = 0 ] || { echo "not root"; return 1; }
    command -v ip > /dev/null || { echo "ip (iproute2) not installed"; return 1; }
    command -v tc > /dev/null || { echo "tc (iproute2) not installed"; return 1; }
    if ! err=$(ip netns add "$ns" 2>&1); then echo "ip netns add failed: $err"; return 1; fi
    if ! err=$(ip -n "$ns" link add vtesta type veth peer name vtestb 2>&1); then
        ip netns del "$ns"; echo "veth unavailable: $err"; return 1
    fi
    if ! err=$(ip -n "$ns" link add br0 type bridge 2>&1); then
        ip netns del "$ns"; echo "bridge unavailable: $err"; return 1
    fi
    if ! err=$(tc -n "$ns" qdisc add dev vtesta root handle 1: htb default 1 2>&1); then
        ip netns del "$ns"; echo "tc htb unavailable: $err"; return 1
    fi
    ip netns del "$ns"
    return 0
}

# netns_master_port LOG: waits up to 5 s for `pccl master` to log its control port there; prints it, or returns 1.
netns_master_port() {
    local port
    for _ in $(seq 1 100); do
        port=$(grep -o 'listening on [^ ]*' "$1" 2>/dev/null | sed 's/.*://')
        [ -n "$port" ] && { echo "$port"; return 0; }
        sleep 0.05
    done
    return 1
}

# netns_add NAME: creates the namespace (loopback up) and records it for cleanup.
netns_add() {
    ip netns add "$1" || return 1
    NETNS_LIST+=("$1")
    ip -n "$1" link set lo up
}

# netns_star BRNS COUNT: namespace BRNS holds bridge br0 (10.66.0.254/24); peer namespace i
# (pcclt<TAG>p<i>, i = 1..COUNT) gets eth0 = 10.66.0.i/24, wired to the bridge by a veth pair.
netns_star() {
    local br=$1 count=$2 i ns
    netns_add "$br" || return 1
    ip -n "$br" link add br0 type bridge || return 1
    ip -n "$br" addr add "$NETNS_SUBNET.254/24" dev br0
    ip -n "$br" link set br0 up
    for i in $(seq 1 "$count"); do
        ns="pcclt${NETNS_TAG}p$i"
        netns_add "$ns" || return 1
        ip link add "vp$i" netns "$br" type veth peer name eth0 netns "$ns" || return 1
        ip -n "$br" link set "vp$i" master br0
        ip -n "$br" link set "vp$i" up
        ip -n "$ns" addr add "$NETNS_SUBNET.$i/24" dev eth0
        ip -n "$ns" link set eth0 up
    done
}

# netns_shape NS DEV: HTB root on DEV in NS, default class 1:999 unshaped (10 Gbit/s): master traffic.
netns_shape() {
    tc -n "$1" qdisc add dev "$2" root handle 1: htb default 999 r2q 1000 || return 1
    tc -n "$1" class add dev "$2" parent 1: classid 1:999 htb rate 10gbit burst 1m cburst 1m quantum 200000
}

# netns_rate NS DEV IP MBPS CLASSID: traffic from NS to IP leaves DEV at MBPS Mbit/s (no borrowing).
netns_rate() {
    local ns=$1 dev=$2 ip=$3 mbps=$4 cid=$5
    tc -n "$ns" class add dev "$dev" parent 1: classid "1:$cid" htb rate "${mbps}mbit" ceil "${mbps}mbit" \
        burst 256k cburst 256k quantum 60000 || return 1
    tc -n "$ns" qdisc add dev "$dev" parent "1:$cid" handle "$cid:" pfifo limit 10000 || return 1
    tc -n "$ns" filter add dev "$dev" parent 1: protocol ip prio 1 u32 match ip dst "$ip/32" flowid "1:$cid"
}
