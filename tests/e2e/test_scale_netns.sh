#!/usr/bin/env bash
# test_scale.sh across network namespaces: the master in a bridge namespace (10.66.0.254) and 256 peers in 4
# namespaces (64 each: 4 hosts on one bridge, scripts/netns/netns_lib.sh) join one run at once, survive 3
# SIGKILLs and 3 joins and end with one hash (tests/e2e/scale_lib.sh). Label scale. Skips (exit 0) only when
# namespaces / veth / bridges cannot be used here (not root, no iproute2, a container without netns).
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/scale_lib.sh"
. "$(dirname "$0")/../../scripts/netns/netns_lib.sh"
if ! reason=$(netns_check); then
    echo "SKIP: network namespaces unavailable: $reason"
    exit 0
fi
trap 'cleanup; netns_cleanup' EXIT
HOSTS=4
BR="pcclt${NETNS_TAG}br"
netns_star "$BR" "$HOSTS" || fail "cannot build the namespaces"
REAL=$PCCL
# the master runs in the bridge's namespace (lib.sh's start_master through this wrapper)
PCCL="$WORK/pccl-in-bridge"
printf '#!/bin/sh\nexec ip netns exec %s %s "$@"\n' "$BR" "$REAL" > "$PCCL"
chmod +x "$PCCL"
export MASTER_LISTEN=0.0.0.0:0
# each peer in the next host namespace, dialling the master across the bridge
NEXT_HOST=0
start_peer() {
    local name=$1; shift
    NEXT_HOST=$((NEXT_HOST % HOSTS + 1))
    ip netns exec "pcclt${NETNS_TAG}p$NEXT_HOST" "$REAL" join --master "$NETNS_SUBNET.254:$PORT" --json "$@" \
        > "$WORK/$name.log" 2> "$WORK/$name.err" &
    LAST_PID=$!
    PIDS+=("$LAST_PID")
}
run_scale 256 20 60
grep -q "($NETNS_SUBNET.$HOSTS:" "$WORK/master.log" || fail "no peer registered from host $HOSTS's address"
