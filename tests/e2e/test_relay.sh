#!/usr/bin/env bash
# test_relay.sh - `pccl relay` on loopback (docs/relay.md), with two relay_peer.c processes as the two sides of an
# edge (the library's relay_dial and tokens):
#  - an open relay pairs a dialer and a target and moves 8 MiB each way intact, while a stranger sending garbage is
#    closed at once and one that never speaks is closed after the greeting deadline; a lone side is told "timed out"
#    after the pairing deadline; a second dialer with a taken token is refused;
#  - over the limits: a third connection from one address and a fourth in all are refused, and once the
#    strangers leave a pair works again;
#  - a relay keyed with the relay key (--print-relay-key) refuses unkeyed tokens and another run's, and pairs the
#    run's; one keyed with the run key file itself does too, and warns that its holder can join the run;
#  - a pair is closed past its byte limit and past its lifetime;
#  - pccl master --relay shows its relays in /v1/status and refuses a ninth one and the any address;
#  - SIGTERM stops the relay (exit 0).
source "$(dirname "$0")/lib.sh"
RP="$BIN/relay_peer"

# start_relay NAME FLAGS...: sets RELAY_PID and RPORT (RELAY_LISTEN, default 127.0.0.1:0)
start_relay() {
    local name=$1; shift
    PCCL_LOG_LEVEL=debug "$PCCL" relay --listen "${RELAY_LISTEN:-127.0.0.1:0}" "$@" > "$WORK/$name.log" 2>&1 &
    RELAY_PID=$!
    PIDS+=("$RELAY_PID")
    RPORT=
    for _ in $(seq 1 100); do
        RPORT=$(grep -o 'listening on [^ ]*' "$WORK/$name.log" 2>/dev/null | sed 's/.*://')
        [ -n "$RPORT" ] && return 0
        sleep 0.05
    done
    fail "relay $name did not start"
}

# peer NAME ROLE NONCE ARGS...: a relay_peer in the background through 127.0.0.1:$RPORT; sets LAST_PID
peer() {
    local name=$1 role=$2 nonce=$3; shift 3
    "$RP" "${PEER_HOST:-127.0.0.1}:$RPORT" "$role" "$nonce" "$@" > "$WORK/$name.out" 2>&1 &
    LAST_PID=$!
    PIDS+=("$LAST_PID")
}

# expect NAME PID STATUS TEXT: PID exits with STATUS within 20 s and its output has TEXT
expect() {
    local rc=0
    wait_pid "$2" 20 || rc=$?
    [ "$rc" = "$3" ] || fail "$1 exited $rc, not $3: $(cat "$WORK/$1.out")"
    grep -q -- "$4" "$WORK/$1.out" || fail "$1 said '$(cat "$WORK/$1.out")', not '$4'"
}

# closed_within FD SECONDS: the relay closes descriptor FD within SECONDS, having sent nothing; a close with bytes
# still unread on the relay's side arrives as a reset rather than EOF, and counts as closed too (only timeout's 124
# means still open)
closed_within() {
    local out rc=0
    out=$(timeout "$2" cat <&"$1" 2>/dev/null) || rc=$?
    [ "$rc" != 124 ] || fail "descriptor $1 still open after $2 s"
    [ -z "$out" ] || fail "the relay answered a stranger: $out"
}

# nonces; a pair is logged by its token's first four bytes (the nonce's)
N1=a1000000000000000000000000000001 N2=a2000000000000000000000000000002 N3=a3000000000000000000000000000003
N4=a4000000000000000000000000000004 N5=a5000000000000000000000000000005 N6=a6000000000000000000000000000006
t0=$SECONDS

# --- an open relay: a pair moves its bytes intact while strangers are closed around it
start_relay open --greeting-timeout 1500 --pair-timeout 2500
grep -q "open: any token" "$WORK/open.log" || fail "the startup line does not say the relay is open"
exec 5<>"/dev/tcp/127.0.0.1/$RPORT"  # never speaks
exec 6<>"/dev/tcp/127.0.0.1/$RPORT"  # garbage
printf 'GET / HTTP/1.1\r\nHost: relay\r\n\r\n' >&6
peer target target "$N1" 8; T=$LAST_PID
peer dialer dialer "$N1" 8; D=$LAST_PID
closed_within 6 2
expect dialer "$D" 0 "ok: sent and received 8388608 bytes"
expect target "$T" 0 "ok: sent and received 8388608 bytes"
closed_within 5 3
exec 5>&- 6>&-
grep -q "pair a1000000: 127.0.0.1:[0-9]* (dialer) <-> 127.0.0.1:[0-9]* (target)" "$WORK/open.log" ||
    fail "the relay did not log the pair"
grep -q "pair a1000000 closed after 16777216 bytes" "$WORK/open.log" || fail "the relay did not log the pair's end"
# a lone side is told that nobody came; a second dialer of a waiting token is refused at once
peer lone dialer "$N2" 0; L=$LAST_PID
sleep 0.4
peer twin dialer "$N2" 0
expect twin "$LAST_PID" 3 "role is taken"
expect lone "$L" 3 "no partner with the token reached the relay in time"
kill -TERM "$RELAY_PID"
rc=0; wait_pid "$RELAY_PID" 5 || rc=$?
[ "$rc" = 0 ] || fail "the relay exited $rc on SIGTERM"
grep -q "stopping (received SIGTERM)" "$WORK/open.log" || fail "the relay did not say it stops"

# --- the connection limits: two per address, three in all (a dual-stack relay: ::1 is another address)
RELAY_LISTEN=0.0.0.0:0 start_relay limits --max-per-address 2 --max-connections 3
exec 5<>"/dev/tcp/127.0.0.1/$RPORT" 6<>"/dev/tcp/127.0.0.1/$RPORT"
peer over_addr dialer "$N3" 0
expect over_addr "$LAST_PID" 3 "busy"
if python3 -c 'import socket; s = socket.socket(socket.AF_INET6); s.bind(("::1", 0))' 2>/dev/null; then
    exec 7<>"/dev/tcp/::1/$RPORT"
    PEER_HOST="[::1]" peer over_total dialer "$N3" 0
    expect over_total "$LAST_PID" 3 "busy"
    exec 7>&-
else
    echo "note: no IPv6 loopback (::1) here, the total limit is not checked"
fi
exec 5>&- 6>&-
sleep 0.3
peer target2 target "$N3" 1; T=$LAST_PID
peer dialer2 dialer "$N3" 1
expect dialer2 "$LAST_PID" 0 "ok: sent and received"
expect target2 "$T" 0 "ok: sent and received"
kill -TERM "$RELAY_PID"; wait_pid "$RELAY_PID" 5 || fail "the limits relay exited $? on SIGTERM"

# --- a keyed relay pairs only the run's tokens
head -c 32 /dev/urandom | base64 > "$WORK/run.key"
head -c 32 /dev/urandom | base64 > "$WORK/other.key"
chmod 600 "$WORK/run.key" "$WORK/other.key"
(umask 077; "$PCCL" relay --print-relay-key --key-file "$WORK/run.key" > "$WORK/relay.key") || fail "no relay key"
grep -q "^pccl-relay-key-v1 [A-Za-z0-9+/]*=*$" "$WORK/relay.key" || fail "relay key: $(cat "$WORK/relay.key")"
rc=0; "$PCCL" relay --print-relay-key > /dev/null 2>&1 || rc=$?
[ "$rc" = 2 ] || fail "--print-relay-key without a key: exit $rc"
start_relay runkeyed --key-file "$WORK/run.key"
grep -q "whoever reads it on this host can join the run" "$WORK/runkeyed.log" || fail "no warning about the run key"
peer target6 target "$N4" 1 --key-file "$WORK/run.key"; T=$LAST_PID
peer dialer6 dialer "$N4" 1 --key-file "$WORK/run.key"
expect dialer6 "$LAST_PID" 0 "ok: sent and received"
expect target6 "$T" 0 "ok: sent and received"
peer unkeyed0 dialer "$N4" 0
expect unkeyed0 "$LAST_PID" 3 "refused the token"
kill -TERM "$RELAY_PID"; wait_pid "$RELAY_PID" 5 || fail "the run-keyed relay exited $? on SIGTERM"
start_relay keyed --key-file "$WORK/relay.key"
grep -q "keyed: tokens of the run's master only" "$WORK/keyed.log" || fail "the startup line does not say keyed"
grep -q "warning" "$WORK/keyed.log" && fail "a relay with the relay key warns: $(cat "$WORK/keyed.log")"
peer unkeyed dialer "$N4" 0
expect unkeyed "$LAST_PID" 3 "refused the token"
peer other dialer "$N4" 0 --key-file "$WORK/other.key"
expect other "$LAST_PID" 3 "refused the token"
peer target3 target "$N4" 2 --key-file "$WORK/run.key"; T=$LAST_PID
peer dialer3 dialer "$N4" 2 --key-file "$WORK/run.key"
expect dialer3 "$LAST_PID" 0 "ok: sent and received 2097152 bytes"
expect target3 "$T" 0 "ok: sent and received 2097152 bytes"
[ "$(grep -c "not minted under the run key" "$WORK/keyed.log")" = 2 ] || fail "the keyed relay did not log two refusals"
kill -TERM "$RELAY_PID"; wait_pid "$RELAY_PID" 5 || fail "the keyed relay exited $? on SIGTERM"

# --- a pair's byte limit and lifetime
start_relay pairlim --max-pair-mib 1 --max-pair-seconds 1
peer target4 target "$N5" 4; T=$LAST_PID
peer dialer4 dialer "$N5" 4
expect dialer4 "$LAST_PID" 5 "broken: sent"
expect target4 "$T" 5 "broken: sent"
grep -q "pair a5000000 closed after [0-9]* bytes .*(byte limit reached)" "$WORK/pairlim.log" || fail "no byte limit in the log"
peer target5 target "$N6" 0 --hold-ms 8000; T=$LAST_PID
peer dialer5 dialer "$N6" 0 --hold-ms 8000
expect dialer5 "$LAST_PID" 0 "closed after"
expect target5 "$T" 0 "closed after"
grep -q "(lifetime reached)" "$WORK/pairlim.log" || fail "no lifetime in the log"
kill -TERM "$RELAY_PID"; wait_pid "$RELAY_PID" 5 || fail "the pairlim relay exited $? on SIGTERM"

# --- the master announces its relays
relays=()
for i in 1 2 3 4 5 6 7 8; do relays+=(--relay "10.0.0.$i"); done
rc=0; "$PCCL" master --listen 127.0.0.1:0 --no-admin "${relays[@]}" --relay 10.0.0.9 > "$WORK/nine.log" 2>&1 || rc=$?
[ "$rc" = 2 ] && grep -q "too many --relay" "$WORK/nine.log" || fail "a ninth relay: exit $rc, $(cat "$WORK/nine.log")"
rc=0; "$PCCL" master --listen 127.0.0.1:0 --no-admin --relay 0.0.0.0:5 > "$WORK/any.log" 2>&1 || rc=$?
[ "$rc" = 2 ] || fail "the any address as a relay: exit $rc, $(cat "$WORK/any.log")"
start_master --relay 127.0.0.1:4000 --relay "[::1]" --relay localhost:4001
for _ in $(seq 1 40); do
    got=$(python3 -c "import json, urllib.request as u; print(' '.join(json.load(u.urlopen('http://127.0.0.1:$APORT/v1/status', timeout=2))['relays']))" 2>/dev/null) && [ -n "$got" ] && break
    sleep 0.1
done
[ "$got" = "127.0.0.1:4000 [::1]:48153 127.0.0.1:4001" ] || fail "/v1/status relays: '$got'"
echo "ok: test_relay ($((SECONDS - t0)) s)"
