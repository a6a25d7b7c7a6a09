#!/usr/bin/env bash
# NAT traversal (c), keyed and encrypted run (tests/e2e/nat_c_lib.sh): --key-file on master, relay and peers and
# --encrypt; the relay carries the edge between a peer behind a --random-fully NAT and one behind a
# port-preserving NAT; kill and join; one hash.
# usage: tests/e2e/test_netns_nat_c_keyed.sh BIN_DIR
. "$(dirname "$0")/nat_c_lib.sh"
scenario k --encrypt
echo "ok: relayed edge through a --random-fully NAT, keyed + encrypted run"
