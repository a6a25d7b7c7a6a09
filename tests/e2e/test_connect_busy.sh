#!/usr/bin/env bash
# A master that accepts a peer's connection and closes it is busy, not absent: 256 strangers from 127.0.0.1 fill
# the master's limit per address for 3 s, and two peers started meanwhile with --connect-timeout 0 (one attempt
# for an absent master) are closed, try again with backoff within PCCL_CONNECT_TIMEOUT_MS, join and finish
# with one hash (docs/protocol.md, "A first connect").
. "$(dirname "$0")/lib.sh"
start_master
python3 - "$PORT" > "$WORK/holder.log" 2>&1 <<'PY' &
import socket, sys, time
held = []
for _ in range(256):
    s = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
    held.append(s)
print("holding", flush=True)
time.sleep(3)
PY
HOLDER=$!
PIDS+=("$HOLDER")
for _ in $(seq 1 200); do grep -q holding "$WORK/holder.log" && break; sleep 0.05; done
grep -q holding "$WORK/holder.log" || fail "the holder did not connect"
SYN=(--workload synthetic --steps 5 --size 4096 --min-world 2 --connect-timeout 0)
start_peer a "${SYN[@]}"; pa=$LAST_PID
start_peer b "${SYN[@]}"; pb=$LAST_PID
wait_pid "$pa" 60 || fail "peer a exited with $?"
wait_pid "$pb" 60 || fail "peer b exited with $?"
grep -q 'closed the connection before welcoming this peer); attempt 1' "$WORK/a.err" "$WORK/b.err" ||
    fail "no peer was closed by the busy master and tried again"
[ "$(json_field "$WORK/a.log" done hash)" = "$(json_field "$WORK/b.log" done hash)" ] || fail "the hashes differ"
[ "$(json_field "$WORK/a.log" done revision)" = 5 ] || fail "peer a did not reach revision 5"
echo "ok: peers closed by a busy master tried again and joined"
