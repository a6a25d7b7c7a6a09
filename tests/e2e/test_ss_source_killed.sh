#!/usr/bin/env bash
# A join fed by three up-to-date sources, one of them SIGKILLed half-way through its share
# (ss_peer --die-after-sent kills it once its send() calls have passed that many bytes to the kernel).
# The receiver moves the dead source's unreceived ranges to the two others within the same sync:
# its first sync succeeds with every tensor holding the elected bytes (none torn), and it received
# exactly the state's size (rx), so nothing already delivered was fetched again; the survivors
# sent the rest. Then the failed-fetch contract, when no holder is left: two sources, both
# SIGKILLed half-way, and the receiver's sync returns pcclRankConnectionLost with no tensor torn
# (each holds its own bytes or the elected ones). Size: PCCL_SS_KILLED_MIB (default 1024: 1 GiB in 16 tensors, about 12 s on loopback; the benchmark
# bench/ss_join.sh runs 1 GiB under rate-limited links).
. "$(dirname "$0")/lib.sh"
mib=${PCCL_SS_KILLED_MIB:-1024}
bytes=$(( mib << 20 ))
share=$(( bytes / 3 ))
start_master
common=(--world 4 --tensors 16 --bytes "$bytes")
for k in 0 1 2; do
    die=(); [ "$k" = 0 ] && die=(--die-after-sent $(( share / 2 )))
    "$BIN/ss_peer" "$PORT" "${common[@]}" --seed 1 --revision 3 "${die[@]}" > "$WORK/up$k.log" 2> "$WORK/up$k.err" &
    UP[$k]=$!; PIDS+=($!)
done
"$BIN/ss_peer" "$PORT" "${common[@]}" --seed 2 --revision 0 --expect-seed 1 > "$WORK/rcv.log" 2> "$WORK/rcv.err" &
R=$!; PIDS+=($R)
wait_pid "$R" 120; rr=$?
wait_pid "${UP[0]}" 60; r0=$?
wait_pid "${UP[1]}" 60; r1=$?
wait_pid "${UP[2]}" 60; r2=$?
first() { grep '"event":"sync","i":0,' "$WORK/$1.log"; }
field0() { first "$1" | python3 -c "import json,sys; print(json.load(sys.stdin)['$2'])"; }
[ "$r0" = 137 ] || fail "the armed source exited $r0, expected 137 (SIGKILL): it was not killed mid-transfer"
[ "$r1$r2" = 00 ] || fail "surviving sources exited $r1 and $r2"
[ "$rr" = 0 ] || { cat "$WORK/rcv.err" >&2; fail "receiver failed (exit $rr)"; }
[ -n "$(first rcv)" ] || fail "the receiver reported no sync"
[ "$(field0 rcv result)" = 0 ] || fail "receiver: first sync returned $(field0 rcv result), expected success"
[ "$(field0 rcv torn)" = 0 ] || fail "receiver: $(field0 rcv torn) tensor(s) torn: $(first rcv)"
[ "$(field0 rcv new)" = 16 ] || fail "receiver: only $(field0 rcv new) of 16 tensors hold the elected bytes: $(first rcv)"
total=$(json_field "$WORK/up1.log" done state_bytes)
rx=$(field0 rcv rx)
[ "$rx" = "$total" ] || fail "receiver rx $rx != state $total: bytes were fetched twice or lost"
[ "$(field0 rcv revision)" = 3 ] || fail "receiver at revision $(field0 rcv revision) after its first sync"
tx1=$(field0 up1 tx); tx2=$(field0 up2 tx)
for t in "$tx1" "$tx2"; do
    [ "$t" -gt "$share" ] || fail "a survivor sent $t bytes, no more than its own share $share: it took none of the dead source's ranges"
done
# The dead source delivered what it had sent before the kill (half its share), at most its share; a
# quarter is the bound, since a socket reset at the kill would drop what its buffers still held.
dead=$(( total - tx1 - tx2 ))
[ "$dead" -ge $(( share / 4 )) ] && [ "$dead" -le $(( share + 16 * 4096 )) ] ||
    fail "survivors sent $tx1 + $tx2: the dead source would have delivered $dead bytes (expected $(( share / 4 ))..$share)"
[ "$(json_field "$WORK/rcv.log" done hash)" = "$(json_field "$WORK/up1.log" done hash)" ] || fail "hashes differ"
echo "ok: 3 sources, one killed: receiver got $rx bytes exactly in $(json_field "$WORK/rcv.log" done sync_ms) ms" \
     "(survivors sent $tx1 + $tx2, the dead one $dead)"

# Every source dies: the fetch fails, nothing is torn, and the receiver did not count a byte twice.
kill -TERM "$MASTER_PID" 2>/dev/null; wait "$MASTER_PID" 2>/dev/null
small=$(( 64 << 20 ))
start_master
common=(--world 3 --tensors 16 --bytes "$small")
for k in 0 1; do
    "$BIN/ss_peer" "$PORT" "${common[@]}" --seed 1 --revision 3 --die-after-sent $(( small / 4 )) \
        > "$WORK/all$k.log" 2> "$WORK/all$k.err" &
    ALL[$k]=$!; PIDS+=($!)
done
"$BIN/ss_peer" "$PORT" "${common[@]}" --seed 2 --revision 0 --expect-seed 1 --expect-result 8 --final-check 0 \
    > "$WORK/lone.log" 2> "$WORK/lone.err" &
L=$!; PIDS+=($L)
wait_pid "$L" 120; rl=$?
wait_pid "${ALL[0]}" 60; a0=$?
wait_pid "${ALL[1]}" 60; a1=$?
[ "$a0$a1" = 137137 ] || fail "both sources should have been SIGKILLed (exit 137), got $a0 and $a1"
[ "$rl" = 0 ] || { cat "$WORK/lone.err" >&2; fail "receiver without sources failed (exit $rl)"; }
[ "$(field0 lone result)" = 8 ] || fail "receiver: sync returned $(field0 lone result), expected 8 (pcclRankConnectionLost)"
[ "$(field0 lone torn)" = 0 ] || fail "receiver: $(field0 lone torn) tensor(s) torn: $(first lone)"
[ "$(field0 lone old)" -ge 1 ] || fail "receiver: no tensor kept its bytes: the kills came after the transfer: $(first lone)"
[ "$(field0 lone rx)" -lt "$small" ] || fail "receiver: rx $(field0 lone rx) with both sources killed half-way"
echo "ok: no source left: pcclRankConnectionLost, $(field0 lone new) tensors landed, $(field0 lone old) kept, none torn"
