#!/usr/bin/env bash
# NAT traversal (c), open run (tests/e2e/nat_c_lib.sh): the relay carries the edge between a peer behind a
# --random-fully NAT and one behind a port-preserving NAT; kill and join; one hash. The keyed and encrypted run
# is test_netns_nat_c_keyed.sh.
# usage: tests/e2e/test_netns_nat_c.sh BIN_DIR
. "$(dirname "$0")/nat_c_lib.sh"
scenario o
echo "ok: relayed edge through a --random-fully NAT, open run"
