#!/usr/bin/env bash
# bench/wanemu (the userspace WAN emulator bench/wan.sh uses when the kernel has no sch_netem):
# two namespaces joined through it with a one-way delay D and a rate R.
#   - a TCP ping-pong round trip is >= 2D and < 2D + 40 ms;
#   - a bulk TCP transfer runs at 0.5R .. 1.1R;
#   - with --loss 100 not even a TCP connect gets through.
# Skips (exit 0) without root, iproute2, python3 or /dev/net/tun. Namespaces and TUNs are named
# pcclw<TAG>*; everything is removed on exit, processes stopped by PID.
# usage: tests/e2e/test_wanemu.sh BIN_DIR
set -u
BIN=${1:?usage: $0 BIN_DIR}
D_MS=25 R_MBIT=40 BULK=$((10 * 1000 * 1000)) # 10 MB at 40 Mbit/s: 2 s, slow start a small part of it
TAG=$(($$ % 100000))
NA=pcclw${TAG}a NB=pcclw${TAG}b TA=pcclw${TAG}ta TB=pcclw${TAG}tb
IPA=10.79.0.1 IPB=10.79.0.2
WORK=$(mktemp -d /tmp/pcclw-test.XXXXXX)
EMU= SRV=

[ "$(id -u)" = 0 ] || { echo "SKIP: not root"; exit 0; }
command -v ip > /dev/null || { echo "SKIP: ip (iproute2) not installed"; exit 0; }
command -v python3 > /dev/null || { echo "SKIP: python3 not installed"; exit 0; }
[ -c /dev/net/tun ] || { echo "SKIP: no /dev/net/tun"; exit 0; }
[ -x "$BIN/wanemu" ] || { echo "FAIL: $BIN/wanemu not built" >&2; exit 1; }

stop_pid() { # PID: TERM, then KILL after 2 s
    [ -n "$1" ] || return 0
    kill -TERM "$1" 2> /dev/null
    for _ in $(seq 20); do kill -0 "$1" 2> /dev/null || break; sleep 0.1; done
    kill -KILL "$1" 2> /dev/null
    wait "$1" 2> /dev/null
}
cleanup() {
    stop_pid "$SRV"
    stop_pid "$EMU"
    for ns in "$NA" "$NB"; do
        for p in $(ip netns pids "$ns" 2> /dev/null); do kill -KILL "$p" 2> /dev/null; done
        ip netns del "$ns" 2> /dev/null
    done
    rm -rf "$WORK"
}
trap cleanup EXIT INT TERM
fail() { echo "FAIL: $*" >&2; cat "$WORK"/*.err >&2 2> /dev/null; exit 1; }

# start_emu ARGS...: wanemu with the two TUNs, moved into NA / NB (created on the first call)
start_emu() {
    "$BIN/wanemu" --link "$TA=$IPA" --link "$TB=$IPB" "$@" > "$WORK/emu.out" 2> "$WORK/emu.err" &
    EMU=$!
    for _ in $(seq 50); do grep -q READY "$WORK/emu.out" && break; sleep 0.1; done
    grep -q READY "$WORK/emu.out" || fail "wanemu did not start"
    for x in a b; do
        local ns=$NA tun=$TA ip=$IPA
        [ "$x" = b ] && ns=$NB tun=$TB ip=$IPB
        ip netns list | grep -qw "$ns" || { ip netns add "$ns" && ip -n "$ns" link set lo up; } || fail "netns $ns"
        ip link set "$tun" netns "$ns" || fail "cannot move $tun into $ns"
        ip netns exec "$ns" sysctl -qw net.ipv6.conf.all.disable_ipv6=1
        ip -n "$ns" link set "$tun" mtu 9000 up
        ip -n "$ns" addr add "$ip/24" dev "$tun"
    done
}

# The server in NB: "pingpong N" echoes N one-byte messages; "sink" reads to EOF and prints
# the bytes and the seconds from accept to EOF. It prints LISTEN once bound; 30 s accept timeout.
SERVER='
import socket, sys, time
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind((sys.argv[1], 5555)); s.listen(1); s.settimeout(30)
print("LISTEN", flush=True)
c, _ = s.accept(); c.settimeout(30)
c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
if sys.argv[2] == "pingpong":
    for _ in range(int(sys.argv[3])): c.sendall(c.recv(1))
else:
    t0, n = time.monotonic(), 0
    while True:
        b = c.recv(1 << 20)
        if not b: break
        n += len(b)
    print(n, time.monotonic() - t0, flush=True)
'
# The client in NA: "pingpong N" prints the smallest round trip in ms; "bulk B" sends B bytes.
CLIENT='
import socket, sys, time
c = socket.create_connection((sys.argv[1], 5555), timeout=float(sys.argv[4]))
c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1); c.settimeout(30)
if sys.argv[2] == "pingpong":
    best = 1e9
    for _ in range(int(sys.argv[3])):
        t = time.monotonic(); c.sendall(b"x"); c.recv(1); best = min(best, time.monotonic() - t)
    print(f"{best * 1e3:.3f}")
else:
    buf, left = bytes(1 << 20), int(sys.argv[3])
    while left > 0:
        n = min(left, len(buf)); c.sendall(buf[:n]); left -= n
c.close()
'
start_server() { # MODE [N]
    ip netns exec "$NB" timeout 60 python3 -c "$SERVER" "$IPB" "$@" > "$WORK/srv.out" 2> "$WORK/srv.err" &
    SRV=$!
    for _ in $(seq 50); do grep -q LISTEN "$WORK/srv.out" && break; sleep 0.1; done
    grep -q LISTEN "$WORK/srv.out" || fail "server did not start"
}

# 1. delay: a ping-pong round trip crosses the emulator twice
start_emu --delay "$D_MS" --rate "$R_MBIT"
start_server pingpong 10
rtt=$(ip netns exec "$NA" timeout 30 python3 -c "$CLIENT" "$IPB" pingpong 10 5 2> "$WORK/cli.err") ||
    fail "ping-pong client failed"
wait "$SRV"; SRV=
python3 -c "import sys; r, d = float(sys.argv[1]), float(sys.argv[2]); sys.exit(not (2 * d <= r < 2 * d + 40))" \
    "$rtt" "$D_MS" || fail "round trip $rtt ms, want >= $((2 * D_MS)) and < $((2 * D_MS + 40)) ms"
echo "ok: round trip ${rtt} ms with a ${D_MS} ms one-way delay"

# 2. rate: a bulk transfer through R Mbit/s (uplink and downlink queues)
start_server sink
ip netns exec "$NA" timeout 60 python3 -c "$CLIENT" "$IPB" bulk "$BULK" 5 2> "$WORK/cli.err" || fail "bulk client failed"
wait "$SRV"; SRV=
read -r got secs <<< "$(grep -v LISTEN "$WORK/srv.out")"
[ "$got" = "$BULK" ] || fail "server received $got of $BULK bytes"
mbit=$(python3 -c "import sys; print(f'{int(sys.argv[1]) * 8 / float(sys.argv[2]) / 1e6:.2f}')" "$got" "$secs")
python3 -c "import sys; m, r = float(sys.argv[1]), float(sys.argv[2]); sys.exit(not (0.5 * r <= m <= 1.1 * r))" \
    "$mbit" "$R_MBIT" || fail "bulk transfer at $mbit Mbit/s, want $R_MBIT Mbit/s within [0.5, 1.1]x"
echo "ok: bulk transfer at $mbit Mbit/s through a $R_MBIT Mbit/s link"
stop_pid "$EMU"; EMU=
grep -q "forwarded" "$WORK/emu.err" || fail "wanemu printed no counters at exit"
echo "ok: counters: $(cat "$WORK/emu.err")"

# 3. loss 100%: not even the SYN arrives (the TUNs of the stopped emulator went away with it)
ip netns del "$NA"; ip netns del "$NB"
start_emu --delay "$D_MS" --loss 100
start_server pingpong 1
if ip netns exec "$NA" timeout 10 python3 -c "$CLIENT" "$IPB" pingpong 1 2 > /dev/null 2>&1; then
    fail "a connection got through 100% loss"
fi
stop_pid "$SRV"; SRV=
stop_pid "$EMU"; EMU=
grep -Eq "loss [1-9]" "$WORK/emu.err" || fail "no losses counted: $(cat "$WORK/emu.err")"
echo "ok: nothing through 100% loss ($(cat "$WORK/emu.err"))"

# 4. bad arguments: exit status 2
"$BIN/wanemu" --link "$TA=$IPA" --loss 101 2> /dev/null
[ $? = 2 ] || fail "bad arguments did not exit 2"
echo "ok: bad arguments exit 2"
