#!/usr/bin/env bash
# test_sd_notify.sh BIN_DIR - `pccl master` and `pccl join` under systemd's notify protocol (Type=notify,
# WatchdogSec=), with notify_listener.py in systemd's place: the master says READY=1 only once its control and
# admin ports answer, then WATCHDOG=1 at half of WATCHDOG_USEC from its event loop, and STOPPING=1 on SIGTERM; a
# peer says READY=1 once accepted, keeps sending WATCHDOG=1 while its master is lost and it waits to re-register
# (alive) while one whose short reconnect window ran out exits 1, and says STOPPING=1 when it leaves.
source "$(dirname "$0")/lib.sh"
LISTENER="python3 $(dirname "$0")/notify_listener.py"
WD_USEC=2000000 # pings every 1 s

# start_listener NAME SOCKET: systemd's end of NOTIFY_SOCKET, logging to $WORK/NAME.notify
start_listener() {
    $LISTENER "$2" "$WORK/$1.notify" 120 2> "$WORK/$1-listener.log" &
    PIDS+=($!)
    for _ in $(seq 1 400); do grep -q '"bound"' "$WORK/$1.notify" 2>/dev/null && return 0; sleep 0.05; done
    fail "notify listener $1 did not start"
}
# count NAME LINE [SINCE]: datagrams of NAME holding the line LINE (received after monotonic time SINCE)
count() {
    python3 - "$WORK/$1.notify" "$2" "${3:-0}" <<'PY'
import json, sys
n = 0
for line in open(sys.argv[1]):
    o = json.loads(line)
    if "msg" in o and sys.argv[2] in o["msg"].split("\n") and o["t"] > float(sys.argv[3]): n += 1
print(n)
PY
}
# wait_msg NAME LINE N SECONDS
wait_msg() {
    for _ in $(seq 1 $(($4 * 20))); do [ "$(count "$1" "$2")" -ge "$3" ] && return 0; sleep 0.05; done
    fail "$1: fewer than $3 datagrams with '$2' after $4 s"
}
now() { python3 -c 'import time; print(time.monotonic())'; }
# pings NAME FROM TO: "COUNT MAX_GAP MEAN_GAP" of WATCHDOG=1 received between monotonic times FROM and TO
pings() {
    python3 - "$WORK/$1.notify" "$2" "$3" <<'PY'
import json, sys
lo, hi = float(sys.argv[2]), float(sys.argv[3])
ts = [o["t"] for o in map(json.loads, open(sys.argv[1])) if "msg" in o and "WATCHDOG=1" in o["msg"].split("\n")]
ts = [t for t in ts if lo <= t <= hi]
gaps = [b - a for a, b in zip(ts, ts[1:])]
print(len(ts), round(max(gaps), 3) if gaps else 0, round(sum(gaps) / len(gaps), 3) if gaps else 0)
PY
}

# --- the master: READY=1 once both ports answer, then the watchdog from its loop
start_listener master "$WORK/master.sock"
NOTIFY_SOCKET="$WORK/master.sock" WATCHDOG_USEC=$WD_USEC start_master
wait_msg master READY=1 1 10
# The listener probes both ports as soon as READY=1 arrives, then logs the result.
for _ in $(seq 1 200); do grep -q '"probe"' "$WORK/master.notify" && break; sleep 0.05; done
grep -q '"probe"' "$WORK/master.notify" || fail "no probe after READY=1: $(cat "$WORK/master.notify")"
grep -q '"probe": "ok"' "$WORK/master.notify" || fail "READY=1 before the ports answered: $(grep probe "$WORK/master.notify")"
# nothing before READY=1 but the listener's own line
first=$(sed -n 2p "$WORK/master.notify")
[[ "$first" == *'"msg": "READY=1\nSTATUS=listening on 127.0.0.1:'"$PORT"', admin on 127.0.0.1:'"$APORT"'"'* ]] \
    || fail "first datagram is not READY=1 with the ports: $first"
t0=$(now); sleep 5; t1=$(now)
read -r n maxgap mean <<< "$(pings master "$t0" "$t1")"
echo "master: $n pings in 5 s, largest gap ${maxgap}s, mean ${mean}s (WATCHDOG_USEC=$WD_USEC)"
[ "$n" -ge 4 ] || fail "master: $n WATCHDOG=1 in 5 s (want one a second)"
awk -v g="$maxgap" -v m="$mean" 'BEGIN { exit !(g < 2.0 && m > 0.7 && m < 1.4) }' \
    || fail "master: pings not at half the watchdog timeout: largest gap $maxgap s, mean $mean s"

# --- peers: A waits a minute for a lost master, B a second and a half
start_listener a "@pccl-e2e-notify-a-$$"
start_listener b "$WORK/b.sock"
NOTIFY_SOCKET="@pccl-e2e-notify-a-$$" WATCHDOG_USEC=$WD_USEC PCCL_MASTER_RECONNECT_MS=60000 \
    start_peer a --workload synthetic --steps 1000000 --step-delay 50
A=$LAST_PID
NOTIFY_SOCKET="$WORK/b.sock" WATCHDOG_USEC=$WD_USEC PCCL_MASTER_RECONNECT_MS=1500 \
    start_peer b --workload synthetic --steps 1000000 --step-delay 50
B=$LAST_PID
wait_msg a READY=1 1 30
wait_msg b READY=1 1 30
wait_events "$WORK/a.log" step 3 30
grep -q 'accepted into the run' "$WORK/a.notify" || fail "peer a: READY=1 without its STATUS"
[ "$(count a STOPPING=1)" -eq 0 ] || fail "peer a: STOPPING=1 before it was asked to stop"
wait_msg a WATCHDOG=1 2 10

kill -9 "$MASTER_PID"
wait "$MASTER_PID" 2>/dev/null
t0=$(now)
wait_pid "$B" 20
rc=$?
[ "$rc" -eq 1 ] || fail "peer b exited $rc after its reconnect window (want 1)"
sleep 4
t1=$(now)
read -r n maxgap mean <<< "$(pings a "$t0" "$t1")"
echo "peer a, master lost: $n pings in $(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", b - a }') s, largest gap ${maxgap}s"
[ "$n" -ge 4 ] || fail "peer a stopped its watchdog while it waits for the lost master ($n pings)"
awk -v g="$maxgap" 'BEGIN { exit !(g < 2.0) }' || fail "peer a: a gap of $maxgap s between pings"
kill -0 "$A" 2>/dev/null || fail "peer a exited within its reconnect window"

# --- the master comes back on its port; a re-registers, and leaves on SIGTERM: STOPPING=1, exit 0
start_listener master2 "$WORK/master2.sock"
NOTIFY_SOCKET="$WORK/master2.sock" WATCHDOG_USEC=$WD_USEC MASTER_LISTEN=127.0.0.1:$PORT start_master
wait_msg master2 READY=1 1 10
for _ in $(seq 1 200); do
    "$PCCL" status --admin "127.0.0.1:$APORT" --json 2>/dev/null | grep -q '"uuid"' && break
    sleep 0.1
done
"$PCCL" status --admin "127.0.0.1:$APORT" --json 2>/dev/null | grep -q '"uuid"' || fail "peer a did not re-register"
kill -TERM "$A"
wait_pid "$A" 30 || fail "peer a did not exit 0 after SIGTERM"
wait_msg a STOPPING=1 1 5
kill -TERM "$MASTER_PID"
wait_pid "$MASTER_PID" 15 || fail "the master did not exit 0 on SIGTERM"
wait_msg master2 STOPPING=1 1 5
touch "$WORK"/{master,master2,a,b}.notify.stop
echo "sd_notify ok"
