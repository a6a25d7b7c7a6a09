# shellcheck shell=bash
# nat_c_lib.sh - NAT traversal (c)'s topology and run, shared by test_netns_nat_c.sh (open) and
# test_netns_nat_c_keyed.sh (keyed and encrypted): one peer behind a NAT that picks a random source port per
# connection (MASQUERADE --random-fully: punching cannot work), one behind a port-preserving NAT, one public peer
# (tests/e2e/nat_lib.sh). The relay (`pccl relay`, announced by `pccl master --relay`) carries the edge between
# the two NAT peers. The second NAT peer is SIGKILLed and a new one joins from behind the same router; every peer
# ends with one hash. Skips (exit 0) only when namespaces or iptables NAT cannot be used here. Sourced by a test,
# which then calls `scenario`.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/nat_lib.sh"
nat_skip_unless_usable
nat_public
nat_host h1 198.18.0.11
nat_router n1 1 random
nat_router n2 2
head -c 32 /dev/urandom | base64 > "$WORK/run.key"
chmod 600 "$WORK/run.key"

# scenario SUFFIX [KEY FLAGS...]: one run; SUFFIX tells the runs' logs apart
scenario() {
    local s=$1 key=() mflags=(); shift
    [ $# -gt 0 ] && key=(--key-file "$WORK/run.key") mflags=("$@")
    nat_relay "${key[@]}"
    nat_start_master --relay "$NAT_RELAY" "${key[@]}" "${mflags[@]}"
    local args=(--workload synthetic --steps 24 --size 200000 --step-delay 100 --min-world 3 "${key[@]}")
    nat_peer "p1$s" h1 "${args[@]}"; local p1=$LAST_PID
    nat_peer "n1$s" n1 "${args[@]}"
    local n1=$LAST_PID
    nat_peer "n2$s" n2 "${args[@]}"
    nat_kill_and_join "$LAST_PID" "p1$s" "n3$s" n2 "${args[@]}"
    NAT_WAIT=("$p1" "$n1" "$LAST_PID")
    nat_assert_edges "every n1$s n3$s relayed" "every n3$s p1$s direct,punched" "some n1$s p1$s relayed"
    nat_same_end "p1$s" "n1$s" "n3$s"
    [ "$(nat_relay_packets)" -gt 0 ] || fail "no packet reached the relay"
    kill -INT "$MASTER_PID" "$NAT_RELAY_PID"
    wait_pid "$MASTER_PID" 10 || fail "master exited with $? on SIGINT"
    wait_pid "$NAT_RELAY_PID" 10 || fail "relay exited with $? on SIGINT"
    echo "ok: ${*:-open} run: the relay carried the edge from behind --random-fully; hash $NAT_HASH"
}
