#!/usr/bin/env bash
# An accept round loses a member while a newcomer is wiring its ring connection to it: the member
# voted, was stopped (SIGSTOP: its kernel still completes TCP connects, but nobody answers the
# handshake), and the newcomer's ring successor is that member. The master kicks it after the
# heartbeat timeout (1 s) and must end the round at once; the newcomer must give up its handshake
# when that verdict arrives, not after PCCL_CONNECT_TIMEOUT_MS (8 s here), and get in on the retry.
. "$(dirname "$0")/lib.sh"
export PCCL_PEER_TIMEOUT_MS=1000 PCCL_TIMEOUT_MS=1000 PCCL_HEARTBEAT_MS=200 PCCL_CONNECT_TIMEOUT_MS=8000
RP="$BIN/round_peer"
start_master
"$RP" "$PORT" first "$WORK" > "$WORK/a.log" 2> "$WORK/a.err" & A=$!; PIDS+=("$A")
for _ in $(seq 1 100); do grep -q '^connected' "$WORK/a.log" && break; sleep 0.05; done
"$RP" "$PORT" second "$WORK" > "$WORK/b.log" 2> "$WORK/b.err" & B=$!; PIDS+=("$B")
for _ in $(seq 1 200); do grep -q '^world 2' "$WORK/a.log" && break; sleep 0.05; done
grep -q '^world 2' "$WORK/a.log" || fail "the second peer was not accepted"

# The newcomer registers first, so that once the first peer is stopped only the second peer's vote
# stands between the stop and the round; the ring of the round will be [first, second, newcomer].
"$RP" "$PORT" newcomer "$WORK" > "$WORK/c.log" 2> "$WORK/c.err" & C=$!; PIDS+=("$C")
for _ in $(seq 1 200); do [ "$(grep -c 'registered' "$WORK/master.log")" -ge 3 ] && break; sleep 0.05; done
[ "$(grep -c 'registered' "$WORK/master.log")" -ge 3 ] || fail "the newcomer did not register"
# The first peer votes, then stops; its vote stays counted at the master.
touch "$WORK/go_first"
for _ in $(seq 1 100); do grep -q '^voting' "$WORK/a.log" && break; sleep 0.05; done
sleep 0.3
kill -STOP "$A"
touch "$WORK/go_second"   # the last vote: the round starts, with the first peer stopped

wait_pid "$C" 20 || fail "the newcomer exited with $?"
wait_pid "$B" 20 || fail "the second peer exited with $?"
t_vote=$(awk '$1 == "voting" {print $3}' "$WORK/b.log")
t_in=$(awk '$1 == "accepted" {print $3}' "$WORK/c.log")
[ -n "$t_vote" ] && [ -n "$t_in" ] || fail "missing timestamps"
took=$((t_in - t_vote))
grep -q "no packet or heartbeat" "$WORK/master.log" || fail "the master did not kick the stopped peer"
grep -q '^vote_result [1-9]' "$WORK/b.log" || fail "the round with the stopped peer did not fail for the second peer"
# Kick after ~1 s, the retry right after; waiting out the handshake would take 8 s or more.
[ "$took" -lt 5000 ] || fail "the newcomer got in $took ms after the round started (handshake not cut short)"
kill -9 "$A" 2>/dev/null
echo "ok: round with a stopped member failed at its kick, newcomer accepted $took ms after the round started"
