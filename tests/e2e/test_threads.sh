#!/usr/bin/env bash
# PCCL 1.0's thread rules and launch semantics (threads_peer.c): a peer alone
# gets pcclTooFewPeers from the async launch itself; then 2 peers run
# all-reduces on a worker thread while their main threads vote
# pcclArePeersPending and poll attributes, and a third peer asks to join
# mid-run and is accepted. Results and shared state are checked exactly.
. "$(dirname "$0")/lib.sh"
END=${THREADS_END:-300}
start_master
"$BIN/threads_peer" "$PORT" alone > "$WORK/alone.log" 2>&1 &
PIDS+=($!)
wait_pid $! 30 || fail "alone peer failed"
grep -q '^done alone 1$' "$WORK/alone.log" || fail "alone peer did not finish"

pids=()
for r in 0 1; do
    "$BIN/threads_peer" "$PORT" run "$END" > "$WORK/peer$r.log" 2>&1 &
    pids+=($!); PIDS+=($!)
done
for _ in $(seq 1 600); do grep -q '^revision' "$WORK/peer0.log" && break; sleep 0.05; done
grep -q '^revision' "$WORK/peer0.log" || fail "the first peers made no progress"
"$BIN/threads_peer" "$PORT" run "$END" > "$WORK/joiner.log" 2>&1 &
pids+=($!); PIDS+=($!)
for i in 0 1 2; do wait_pid "${pids[$i]}" 90 || fail "peer $i failed"; done

want=$(awk -v n=4096 -v e="$END" 'BEGIN { printf "%.1f", n * e }')
for f in peer0 peer1 joiner; do
    read -r word rev polls sum seen < <(grep '^done' "$WORK/$f.log")
    [ "$word" = done ] && [ "$rev" = "$END" ] || fail "$f did not reach revision $END"
    [ "$sum" = "$want" ] || fail "$f: shared state sum $sum, want $want"
    [ "$polls" -gt 0 ] || fail "$f: the main thread never polled during a collective"
    case $f in peer*) [ "$seen" -ge 1 ] || fail "$f never saw the joiner pending";; esac
done
grep -q 'world 3' "$WORK/joiner.log" || fail "the joiner never ran in a world of 3"
echo "ok: pcclTooFewPeers at launch; collectives on worker threads with votes and attributes on the main thread"
