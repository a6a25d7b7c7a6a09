# nat_lib.sh - a NAT topology in network namespaces for the NAT traversal tests (sourced after lib.sh; docs/nat.md
# "Tests").
#
#   public network 198.18.0.0/24 (the benchmarking range: no real host has it): namespace "pub" holds the bridge
#   br0 (198.18.0.1: the master and the relay run there); nat_host adds a public host on the bridge; nat_router
#   adds a NAT router (wan 198.18.0.(100+I) on the bridge, lan 10.I.0.1) fronting a private namespace (10.I.0.2,
#   default route via the router). The router masquerades what leaves wan (port-preserving, or with
#   --random-fully a fresh random source port per connection), forwards inbound only for connections the private
#   side opened, and drops other inbound SYNs silently (no RST) as home routers do.
#
# Every namespace is named pcclt<TAG>... (scripts/netns/netns_lib.sh: netns_cleanup, installed in the trap below,
# kills what runs in them by PID and deletes them); nothing is created in the root namespace.
. "$(dirname "${BASH_SOURCE[0]}")/../../scripts/netns/netns_lib.sh"

NAT_PUB="pcclt${NETNS_TAG}pub"
NAT_MASTER_IP=198.18.0.1
NAT_LINKS=0
trap 'cleanup; netns_cleanup' EXIT

# nat_check: prints why and returns 1 when namespaces or iptables NAT cannot be used here.
nat_check() {
    local reason ns="pcclt${NETNS_TAG}ipt"
    reason=$(netns_check) || { echo "$reason"; return 1; }
    command -v iptables > /dev/null || { echo "iptables not installed (scripts/deps.sh installs it)"; return 1; }
    ip netns add "$ns" || { echo "ip netns add failed"; return 1; }
    if ! reason=$(ip netns exec "$ns" iptables -t nat -A POSTROUTING -o lo -j MASQUERADE --random-fully 2>&1) ||
       ! reason=$(ip netns exec "$ns" iptables -A INPUT -m conntrack --ctstate NEW -j DROP 2>&1); then
        ip netns del "$ns"
        echo "iptables NAT unavailable: $reason"
        return 1
    fi
    ip netns del "$ns"
}

# nat_skip_unless_usable: exit 0 with SKIP when nat_check fails (not root, a kernel without netns or NAT).
nat_skip_unless_usable() {
    local reason
    if ! reason=$(nat_check); then echo "SKIP: NAT namespaces unavailable: $reason"; exit 0; fi
}

# nat_wan IP... (before nat_public; needs $BIN/wanemu): the public network is an emulated WAN instead of a bridge:
# bench/wanemu.c forwards between one TUN per public address (the master's 198.18.0.1 and each IP given: hosts,
# routers' wan, the relay) with WAN_DELAY ms one way, WAN_RATE Mbit/s per link and direction (bench/wan.sh).
NAT_TUNS=()
nat_wan() {
    local ip k=0 links=()
    for ip in "$NAT_MASTER_IP" "$@"; do
        NAT_TUNS+=("$ip=pt${NETNS_TAG}w$k")
        links+=(--link "pt${NETNS_TAG}w$k=$ip")
        k=$((k + 1))
    done
    "$BIN/wanemu" "${links[@]}" --delay "${WAN_DELAY:-20}" --rate "${WAN_RATE:-1000}" --seed 1 \
        > "$WORK/wanemu.out" 2> "$WORK/wanemu.err" &
    PIDS+=($!)
    for _ in $(seq 1 100); do grep -q READY "$WORK/wanemu.out" && return 0; sleep 0.05; done
    fail "wanemu did not start: $(cat "$WORK/wanemu.err")"
}

# nat_public: the public namespace with its bridge (or its TUN into the WAN emulation, after nat_wan); PCCL_PUB runs
# pccl in it (lib.sh's start_master runs there).
nat_public() {
    netns_add "$NAT_PUB" || fail "cannot create the public namespace"
    if [ ${#NAT_TUNS[@]} -gt 0 ]; then
        nat_wire "$NAT_PUB" wan0 "$NAT_MASTER_IP/24"
    else
        # a fixed address: a bridge otherwise takes its ports' lowest one, which moves as ports come and go
        ip -n "$NAT_PUB" link add br0 address 02:00:c6:12:00:01 type bridge || fail "bridge"
        ip -n "$NAT_PUB" addr add "$NAT_MASTER_IP/24" dev br0
        ip -n "$NAT_PUB" link set br0 up
    fi
    PCCL_PUB="$WORK/pccl-in-pub"
    printf '#!/bin/sh\nexec ip netns exec %s %s "$@"\n' "$NAT_PUB" "$PCCL" > "$PCCL_PUB"
    chmod +x "$PCCL_PUB"
}

# nat_wire NS DEV IP/LEN: a veth pair from NS's DEV to a port of the public bridge (or, after nat_wan, the TUN of
# IP moved into NS and renamed DEV).
nat_wire() {
    local port="v$NAT_LINKS" t
    for t in "${NAT_TUNS[@]}"; do
        [ "${t%%=*}" = "${3%/*}" ] || continue
        ip link set "${t#*=}" netns "$1" && ip -n "$1" link set "${t#*=}" name "$2" || fail "TUN of ${3%/*}"
        ip -n "$1" link set "$2" mtu 9000 up
        ip -n "$1" addr add "$3" dev "$2"
        return 0
    done
    [ ${#NAT_TUNS[@]} -eq 0 ] || fail "no WAN link for ${3%/*} (nat_wan)"
    NAT_LINKS=$((NAT_LINKS + 1))
    ip link add "$2" netns "$1" type veth peer name "$port" netns "$NAT_PUB" || fail "veth $1/$2"
    ip -n "$NAT_PUB" link set "$port" master br0
    ip -n "$NAT_PUB" link set "$port" up
    ip -n "$1" addr add "$3" dev "$2"
    ip -n "$1" link set "$2" up
}

# nat_host NAME IP: a public host namespace pcclt<TAG>NAME at IP (198.18.0.x) on the bridge.
nat_host() {
    local ns="pcclt${NETNS_TAG}$1"
    netns_add "$ns" || fail "cannot create namespace $ns"
    nat_wire "$ns" eth0 "$2/24"
}

# nat_router NAME I [random]: router namespace pcclt<TAG>NAME-r (wan 198.18.0.(100+I), lan 10.I.0.1) in front of
# the private namespace pcclt<TAG>NAME (10.I.0.2). "random" masquerades with --random-fully.
nat_router() {
    local name=$1 i=$2 mode=${3:-} r="pcclt${NETNS_TAG}$1-r" p="pcclt${NETNS_TAG}$1"
    local masq=(-t nat -A POSTROUTING -o wan -j MASQUERADE)
    [ "$mode" = random ] && masq+=(--random-fully)
    netns_add "$r" && netns_add "$p" || fail "cannot create the namespaces of $name"
    nat_wire "$r" wan "198.18.0.$((100 + i))/24"
    ip link add lan netns "$r" type veth peer name eth0 netns "$p" || fail "veth $name"
    ip -n "$r" addr add "10.$i.0.1/24" dev lan && ip -n "$r" link set lan up
    ip -n "$p" addr add "10.$i.0.2/24" dev eth0 && ip -n "$p" link set eth0 up
    ip -n "$p" route add default via "10.$i.0.1" || fail "default route of $name"
    ip netns exec "$r" sysctl -qw net.ipv4.ip_forward=1 || fail "ip_forward in $r"
    local rule
    for rule in "${masq[*]}" \
        "-A FORWARD -i wan -o lan -m conntrack --ctstate ESTABLISHED,RELATED -j ACCEPT" \
        "-A FORWARD -i wan -o lan -j DROP" \
        "-A INPUT -i wan -p tcp -m conntrack --ctstate NEW -j DROP"; do
        # shellcheck disable=SC2086 # each rule is a list of words
        ip netns exec "$r" iptables $rule || fail "iptables in $r: $rule"
    done
}

# nat_ns NAME: the namespace nat_host or nat_router made for NAME.
nat_ns() { echo "pcclt${NETNS_TAG}$1"; }

# nat_peer NAME HOST ARGS...: `pccl join` in HOST's namespace against the master (lib.sh's start_master set PORT);
# output in $WORK/NAME.log and .err; sets LAST_PID.
nat_peer() {
    local name=$1 ns; ns=$(nat_ns "$2"); shift 2
    ip netns exec "$ns" "$PCCL" join --master "$NAT_MASTER_IP:$PORT" --json --name "$name" "$@" \
        > "$WORK/$name.log" 2> "$WORK/$name.err" &
    LAST_PID=$!
    PIDS+=("$LAST_PID")
}

# nat_start_master FLAGS...: lib.sh's start_master in the public namespace, serving the bridge; admin on its loopback.
nat_start_master() {
    local real=$PCCL
    PCCL=$PCCL_PUB MASTER_LISTEN=0.0.0.0:0 start_master "$@"
    PCCL=$real
}

# nat_status_json: the master's /v1/status document (pccl status --json in the public namespace).
nat_status_json() { "$PCCL_PUB" status --admin "127.0.0.1:$APORT" --json 2> /dev/null; }

# nat_kill_and_join VICTIM_PID WATCH NEW_NAME NEW_HOST ARGS...: waits for 8 steps in WATCH's log, SIGKILLs the
# victim, waits until WATCH went 5 steps on without it and joins NEW_NAME in NEW_HOST's namespace (LAST_PID).
nat_kill_and_join() {
    local victim=$1 watch=$2 name=$3 host=$4 before; shift 4
    wait_events "$WORK/$watch.log" step 8 30
    kill -9 "$victim"
    before=$(count_events "$WORK/$watch.log" step)
    wait_events "$WORK/$watch.log" step $((before + 5)) 20
    nat_peer "$name" "$host" "$@"
}

# nat_same_end NAME...: every peer exited 0 within 40 s (their PIDs in NAT_WAIT), ended with the first one's hash,
# and their step logs agree (lib.sh's same_state); the last named peer received the shared state.
nat_same_end() {
    local p n h
    for p in "${NAT_WAIT[@]}"; do wait_pid "$p" 40 || fail "peer $p exited with $?"; done
    h=$(json_field "$WORK/$1.log" done hash)
    [ -n "$h" ] || fail "$1 printed no final hash"
    for n in "$@"; do
        [ "$(json_field "$WORK/$n.log" done hash)" = "$h" ] || fail "$n's final hash differs from $1's"
    done
    same_state "$@"
    [ "$(sum_field "$WORK/${!#}.log" step ss_rx_bytes)" -gt 0 ] || fail "${!#} received no shared state"
    NAT_HASH=$h
}

# The p2p edges /v1/status reports with how each was made (direct, punched, relayed), as lines "NAME NAME KIND"
# (names as nat_peer gave them, --name; an edge listed in a peer's object, {"peer": UUID, "kind": KIND} in its
# "edges", has that peer as its other end).
nat_edges() {
    python3 -c '
import json, sys
doc = json.load(sys.stdin)
names = {p["uuid"]: p.get("name", "") for p in doc.get("peers", [])}
kinds = ("direct", "punched", "relayed")
def ends(o):
    found = set()
    for v in o.values():
        if isinstance(v, str):
            found |= {n for u, n in names.items() if n and (v == n or (len(v) >= 8 and u.startswith(v)) or v == u)}
    return found
def walk(o, owner):
    if isinstance(o, list):
        for v in o: walk(v, owner)
    elif isinstance(o, dict):
        if "uuid" in o and o["uuid"] in names: owner = names[o["uuid"]]
        kind = [v for k, v in o.items() if k != "state" and isinstance(v, str) and v in kinds]
        if kind:
            e = ends(o) | ({owner} if owner else set())
            if len(e) == 2: print(*sorted(e), kind[0])
        for v in o.values(): walk(v, owner)
walk(doc, None)' | sort -u
}

# nat_assert_edges RULE...: RULE is "every|some GLOB GLOB KINDS" (names, e.g. "p* n2", and kinds separated by
# commas). every: at least one edge seen joins such names and all that do were made one of those ways; some: at
# least one of them was (the two directions of a pair may differ: a NAT peer dials out directly). The edges are
# read from /v1/status every 0.5 s, for up to 20 s, until the rules hold; those seen are kept in $WORK/edges.txt.
nat_assert_edges() {
    local why
    : > "$WORK/edges.txt"
    for _ in $(seq 1 40); do
        nat_status_json > "$WORK/status.json" && nat_edges < "$WORK/status.json" >> "$WORK/edges.txt" 2> /dev/null
        sort -u -o "$WORK/edges.txt" "$WORK/edges.txt"
        why=$(nat_edge_rules "$@") && return 0
        sleep 0.5
    done
    fail "$why (edges seen: $(tr '\n' ';' < "$WORK/edges.txt"))"
}

# nat_edge_rules RULE...: nat_assert_edges's check of $WORK/edges.txt; prints why and returns 1 when a rule fails.
nat_edge_rules() {
    local rule q a b kinds seen good x y k
    for rule in "$@"; do
        read -r q a b kinds <<< "$rule"
        seen=0 good=0
        while read -r x y k; do
            # shellcheck disable=SC2053 # globs on purpose
            [[ $x == $a && $y == $b ]] || [[ $x == $b && $y == $a ]] || continue
            seen=1
            if [[ ",$kinds," == *",$k,"* ]]; then good=1
            elif [ "$q" = every ]; then echo "edge $x-$y is $k, expected $kinds"; return 1
            fi
        done < "$WORK/edges.txt"
        [ "$seen" = 1 ] || { echo "no edge between $a and $b in /v1/status"; return 1; }
        [ "$good" = 1 ] || { echo "no edge between $a and $b is $kinds"; return 1; }
    done
}

# nat_relay [FLAGS...]: `pccl relay` on a public host of its own (198.18.0.2:48160, NAT_RELAY; made on the first
# call), its log in $WORK/relay.log; a counting iptables rule there, zeroed here, measures what reaches it
# (nat_relay_packets).
NAT_RELAY=198.18.0.2:48160
nat_relay() {
    local ns; ns=$(nat_ns relay)
    if ! ip netns exec "$ns" true 2> /dev/null; then
        nat_host relay 198.18.0.2
        ip netns exec "$ns" iptables -A INPUT -p tcp --dport 48160 || fail "iptables counter in $ns"
    fi
    ip netns exec "$ns" iptables -Z INPUT
    ip netns exec "$ns" "$PCCL" relay --listen "$NAT_RELAY" "$@" > "$WORK/relay.log" 2>&1 &
    NAT_RELAY_PID=$!
    PIDS+=("$NAT_RELAY_PID")
    for _ in $(seq 1 100); do
        ip netns exec "$ns" ss -Htln "sport = :48160" | grep -q . && return 0
        kill -0 "$NAT_RELAY_PID" 2> /dev/null || fail "pccl relay exited: $(tail -n 3 "$WORK/relay.log")"
        sleep 0.05
    done
    fail "pccl relay is not listening on $NAT_RELAY after 5 s"
}

# nat_relay_packets: TCP packets that reached the relay's port so far.
nat_relay_packets() {
    ip netns exec "$(nat_ns relay)" iptables -nvxL INPUT | awk '/dpt:48160/ {print $1; exit}'
}
