#!/usr/bin/env bash
# NAT traversal (b): two peers behind two different port-preserving masquerading NAT routers and one public peer
# (tests/e2e/nat_lib.sh). A relay is announced, but the NAT peers reach each other by hole punching (simultaneous
# open through both routers), two connections per ring edge (--pool 2: the pair's second punch has its own
# punch index, docs/nat.md): not one packet reaches the relay. One NAT peer is SIGKILLed and a new one joins from
# behind the same router; every peer ends with one hash. Skips (exit 0) only when namespaces or iptables NAT
# cannot be used here.
# usage: tests/e2e/test_netns_nat_b.sh BIN_DIR
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/nat_lib.sh"
nat_skip_unless_usable
nat_public
nat_host h1 198.18.0.11
nat_router n1 1
nat_router n2 2
nat_relay
nat_start_master --relay "$NAT_RELAY"
args=(--workload synthetic --steps 40 --size 200000 --step-delay 100 --min-world 3 --pool 2)
nat_peer p1 h1 "${args[@]}"; P1=$LAST_PID
nat_peer n1 n1 "${args[@]}"; N1=$LAST_PID
nat_peer n2 n2 "${args[@]}"; N2=$LAST_PID
nat_kill_and_join "$N2" p1 n3 n2 "${args[@]}"
NAT_WAIT=("$P1" "$N1" "$LAST_PID")
nat_assert_edges "every n1 n3 punched" "every n* p1 direct,punched"
nat_same_end p1 n1 n3
[ "$(nat_relay_packets)" = 0 ] || fail "$(nat_relay_packets) packets reached the relay"
echo "ok: two peers behind two NATs punched through to each other (no relay traffic), kill and join; hash $NAT_HASH"
