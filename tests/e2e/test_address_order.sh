#!/usr/bin/env bash
# A name is dialled at each of its addresses in getaddrinfo's order until one connects, and [::] serves both
# families (docs/deploy.md, "Addresses"). The peers run in a private mount namespace whose /etc/hosts gives
# "localhost" both ::1 and 127.0.0.1 (::1 first, RFC 6724), so nothing changes for the rest of the host:
#  1. a master on [::1] only: peers dialling localhost:PORT join at ::1;
#  2. a master on 127.0.0.1 only: ::1 refuses first, the peers join at 127.0.0.1;
#  3. a master on [::]: a peer over 127.0.0.1 and one over [::1] join one run.
# Each run's peers end with equal hashes. Skips (exit 0) only without an IPv6 loopback or a mount namespace.
. "$(dirname "$0")/lib.sh"
if ! python3 -c 'import socket; s = socket.socket(socket.AF_INET6); s.bind(("::1", 0))' 2>/dev/null; then
    echo "SKIP: no IPv6 loopback (::1) here"
    exit 0
fi
printf '127.0.0.1 localhost\n::1 localhost\n' > "$WORK/hosts"
order=$(unshare -m sh -c 'mount --bind "$1" /etc/hosts && getent ahosts localhost' sh "$WORK/hosts" 2>/dev/null |
        awk '$2 == "STREAM" {print $1}' | tr '\n' ' ')
if [ "$order" != "::1 127.0.0.1 " ]; then
    echo "SKIP: no private mount namespace with its own /etc/hosts here (localhost: $order)"
    exit 0
fi

# named_peer NAME ARGS...: pccl join --master localhost:$PORT in the namespace; sets LAST_PID
named_peer() {
    local name=$1; shift
    unshare -m sh -c 'mount --bind "$1" /etc/hosts && shift && exec "$@"' sh "$WORK/hosts" \
        "$PCCL" join --master "localhost:$PORT" --json "$@" > "$WORK/$name.log" 2> "$WORK/$name.err" &
    LAST_PID=$!
    PIDS+=("$LAST_PID")
}
# run_ends PIDS...: every peer finished 5 steps with one hash
run_ends() {
    local p h='' name
    for p in "$@"; do wait_pid "$p" 60 || fail "peer $p exited with $?"; done
    for name in $NAMES; do
        [ "$(count_events "$WORK/$name.log" step)" -eq 5 ] || fail "$name did not complete 5 steps"
        [ -n "$h" ] || h=$(json_field "$WORK/$name.log" done hash)
        [ "$(json_field "$WORK/$name.log" done hash)" = "$h" ] || fail "$name's hash differs"
    done
}
stop_master() {
    kill -INT "$MASTER_PID"
    wait_pid "$MASTER_PID" 10 || fail "master exited with $? on SIGINT"
}
SYN=(--workload synthetic --steps 5 --size 4096 --min-world 2)

# 1. [::1] only: localhost's first address
MASTER_LISTEN='[::1]:0' start_master
named_peer a1 "${SYN[@]}"; p1=$LAST_PID
named_peer a2 "${SYN[@]}"; p2=$LAST_PID
NAMES="a1 a2" run_ends "$p1" "$p2"
grep -q 'registered' "$WORK/master.log" && grep 'registered' "$WORK/master.log" | grep -qv '(\[::1\]' &&
    fail "a peer registered from another address than ::1"
stop_master

# 2. 127.0.0.1 only: ::1 refuses, the next address connects (within the one attempt: no retry logged)
MASTER_LISTEN='127.0.0.1:0' start_master
named_peer b1 "${SYN[@]}" --connect-timeout 0; p1=$LAST_PID
named_peer b2 "${SYN[@]}" --connect-timeout 0; p2=$LAST_PID
NAMES="b1 b2" run_ends "$p1" "$p2"
! grep -q 'not reachable' "$WORK/b1.err" "$WORK/b2.err" || fail "a peer retried instead of dialling the next address"
stop_master

# 3. [::] serves both families
MASTER_LISTEN='[::]:0' start_master
grep -q 'listening on \[::\]:' "$WORK/master.log" || fail "master does not say it listens on [::]"
MASTER_HOST=127.0.0.1 start_peer c1 "${SYN[@]}"; p1=$LAST_PID
MASTER_HOST='[::1]' start_peer c2 "${SYN[@]}"; p2=$LAST_PID
NAMES="c1 c2" run_ends "$p1" "$p2"
stop_master
echo "ok: localhost dialled at ::1 and at 127.0.0.1 in getaddrinfo's order; [::] served IPv4 and IPv6"
