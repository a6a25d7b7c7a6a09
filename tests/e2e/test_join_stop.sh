#!/usr/bin/env bash
# SIGTERM ends `pccl join` within 2 s with exit 0 in every state a supervisor can catch it in
# (pccl-join(1)): connecting to a master that is not there yet; waiting for a lost master; waiting in
# an accept round as a newcomer; resting between steps; waiting in a collective's vote while the other
# peer computes (a clean leave: the master aborts no collective), and computing DiLoCo's inner steps;
# receiving the shared state in a sync made long by a rate-limited relay in front of one source (its
# transfer ends at once; the others go on).
# PCCL_TEST_STOP_MS (default 2000) is the bound, for slow sanitizer builds; PCCL_TEST_LONG_INNER_STEPS (default
# 300) the inner steps of the peer stopped while it computes: sanitizer builds compute several times slower.
. "$(dirname "$0")/lib.sh"
STOP_MS=${PCCL_TEST_STOP_MS:-2000}
LONG_INNER=${PCCL_TEST_LONG_INNER_STEPS:-300}

free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

# stop NAME PID: SIGTERM, then exit 0 within STOP_MS and a successful "left" event in $WORK/NAME.log
stop() {
    local name=$1 pid=$2 t0 st ms
    t0=$(date +%s%N)
    kill -TERM "$pid"
    wait_pid "$pid" 30
    st=$?
    ms=$(( ($(date +%s%N) - t0) / 1000000 ))
    [ "$st" -eq 0 ] || fail "$name: exit $st after SIGTERM"
    [ "$ms" -le "$STOP_MS" ] || fail "$name: SIGTERM took $ms ms (more than $STOP_MS)"
    [ "$(json_field "$WORK/$name.log" left ok)" = true ] || fail "$name: no successful 'left' event"
    echo "$name: exit 0 in $ms ms"
}

# status_py EXPR: evaluates a Python expression over s = the master's /v1/status document
status_py() {
    python3 - "$APORT" "$1" <<'PY'
import json, sys, urllib.request
s = json.load(urllib.request.urlopen("http://127.0.0.1:%s/v1/status" % sys.argv[1], timeout=5))
print(eval(sys.argv[2]))
PY
}

# wait_status EXPR SECONDS: until status_py EXPR prints True
wait_status() {
    for _ in $(seq 1 $(($2 * 10))); do [ "$(status_py "$1" 2>/dev/null)" = True ] && return 0; sleep 0.1; done
    fail "the master's status never satisfied: $1"
}

# 1. Connecting: nobody listens yet; the peer retries (logged at the default level) until the signal.
P=$(free_port)
"$PCCL" join --master 127.0.0.1:"$P" --json --workload synthetic > "$WORK/early.log" 2> "$WORK/early.err" &
EARLY=$!; PIDS+=("$EARLY")
for _ in $(seq 1 100); do grep -q 'not reachable' "$WORK/early.err" && break; sleep 0.05; done
grep -q 'not reachable (Connection refused)' "$WORK/early.err" || fail "the peer did not log its wait for the master"
stop early "$EARLY"

# 2. In an accept round: two peers take a step and rest; a newcomer waits to be accepted.
start_master
args=(--workload synthetic --steps 1000 --size 40000 --step-delay 60000)
start_peer a "${args[@]}"; A=$LAST_PID
start_peer b "${args[@]}"; B=$LAST_PID
wait_events "$WORK/a.log" step 1 60
wait_events "$WORK/b.log" step 1 60
start_peer newcomer "${args[@]}"; N=$LAST_PID
wait_status "sum(p['phase'] == 'registered' for p in s['peers']) == 1" 30
stop newcomer "$N"
wait_status "len(s['peers']) == 2" 10
grep -q 'left the run' "$WORK/master.log" || fail "the master did not log the newcomer's leave"
# Resting in --step-delay is no wait either.
stop a "$A"

# 3. Waiting for a lost master: the master is SIGKILLed, b reconnects until the signal.
kill -9 "$MASTER_PID"; wait "$MASTER_PID" 2>/dev/null
for _ in $(seq 1 100); do grep -q 'lost the master' "$WORK/b.err" && break; sleep 0.05; done
grep -q 'lost the master; reconnecting' "$WORK/b.err" || fail "b did not notice the lost master"
sleep 0.5
stop b "$B"

# 4. In a collective's vote: c computes one inner step and votes, d computes for seconds (and is stopped
# while it computes).
start_master
start_peer c --workload fashion-mnist --steps 1000 --inner-steps 1; C=$LAST_PID
start_peer d --workload fashion-mnist --steps 1000 --inner-steps "$LONG_INNER"; D=$LAST_PID
wait_events "$WORK/c.log" step 1 300
wait_status "sum(p['state'] == 'collective' for p in s['peers']) == 1" 300
aborted=$(status_py "s['counters']['collectives_aborted']")
stop c "$C"
sleep 0.3 # the admin port's documents are renewed every 250 ms
[ "$(status_py "s['counters']['collectives_aborted']")" = "$aborted" ] || fail "the leave aborted a collective"
[ "$(status_py "s['counters']['peers_left']")" = 1 ] || fail "the master did not count c as left"
stop d "$D"

# 5. Syncing: source f is reached through a relay that is throttled once the run is going, so the
# newcomer g receives the half of the state that f sends for seconds.
RELAY=$(free_port); FP2P=$(free_port)
python3 - "$RELAY" "$FP2P" "$WORK/throttle" > "$WORK/relay.out" 2>&1 <<'PY' &
import os, socket, sys, threading, time
listen, target, flag = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
RATE = 1 << 20  # bytes per second per direction while the flag file exists
def pump(a, b):
    try:
        while True:
            x = a.recv(16384)
            if not x: break
            b.sendall(x)
            if os.path.exists(flag): time.sleep(len(x) / RATE)
    except OSError: pass
    for s in (a, b):
        try: s.shutdown(socket.SHUT_RDWR)
        except OSError: pass
ls = socket.socket(); ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
ls.bind(("127.0.0.1", listen)); ls.listen(64)
print("ready", flush=True)
while True:
    c, _ = ls.accept()
    try: u = socket.create_connection(("127.0.0.1", target), timeout=5)
    except OSError: c.close(); continue
    u.settimeout(None)
    threading.Thread(target=pump, args=(c, u), daemon=True).start()
    threading.Thread(target=pump, args=(u, c), daemon=True).start()
PY
PIDS+=($!)
for _ in $(seq 1 50); do grep -q ready "$WORK/relay.out" && break; sleep 0.1; done
start_master
args=(--workload synthetic --steps 100000 --size 8388608 --step-delay 100)
start_peer e "${args[@]}"; E=$LAST_PID
start_peer f "${args[@]}" --p2p-port "$FP2P" --advertise 127.0.0.1:"$RELAY"; F=$LAST_PID
wait_events "$WORK/e.log" step 3 60
touch "$WORK/throttle"
start_peer g "${args[@]}"; G=$LAST_PID
wait_status "sum(p['phase'] == 'accepted' for p in s['peers']) == 3 and any(o['kind'] == 'shared_state_sync' and o['state'] == 'running' for gr in s['groups'] for o in gr['operations'])" 60
[ "$(count_events "$WORK/g.log" step)" = 0 ] || fail "g finished its first sync before the signal: the relay did not slow it"
stop g "$G"
rm -f "$WORK/throttle"
before=$(count_events "$WORK/e.log" step)
wait_events "$WORK/e.log" step $((before + 3)) 60 # the others go on without g
stop e "$E"
stop f "$F"
echo "ok: SIGTERM ends pccl join within $STOP_MS ms with exit 0 while connecting, in an accept round, resting, between masters, in a collective's vote and receiving the shared state"
