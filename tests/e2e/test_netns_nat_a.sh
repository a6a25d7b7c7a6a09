#!/usr/bin/env bash
# NAT traversal (a): one peer behind a masquerading NAT router, two on the routed public network with the master
# (tests/e2e/nat_lib.sh). No port forward, no --advertise: the public peers cannot dial the NAT peer's address, so
# every edge towards it is made by the fallback (a punch through the port-preserving NAT, or the relay). The NAT
# peer is SIGKILLed mid-run and a new one joins from behind the same router; every peer ends with one hash, and
# the master's status shows the NAT peer's edges as punched or relayed, the public pair's as direct. Skips (exit 0)
# only when namespaces or iptables NAT cannot be used here.
# usage: tests/e2e/test_netns_nat_a.sh BIN_DIR
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/nat_lib.sh"
nat_skip_unless_usable
nat_public
nat_host h1 198.18.0.11
nat_host h2 198.18.0.12
nat_router n1 1
nat_start_master
args=(--workload synthetic --steps 40 --size 200000 --step-delay 100 --min-world 3)
nat_peer p1 h1 "${args[@]}"; P1=$LAST_PID
nat_peer p2 h2 "${args[@]}"; P2=$LAST_PID
nat_peer n1 n1 "${args[@]}"; N1=$LAST_PID
nat_kill_and_join "$N1" p1 n2 n1 "${args[@]}"
NAT_WAIT=("$P1" "$P2" "$LAST_PID")
nat_assert_edges "every p1 p2 direct" "some n2 p* punched,relayed"
nat_same_end p1 p2 n2
echo "ok: a peer behind a masquerading NAT (killed, replaced from behind it) and two public peers; hash $NAT_HASH"
