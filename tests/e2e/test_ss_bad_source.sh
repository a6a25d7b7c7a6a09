#!/usr/bin/env bash
# A source that serves bytes other than the ones it announced (ss_peer --lie-after-ms changes a
# byte of its last tensor after the sync hashed it): the receiver takes the tensors that hash
# right, keeps the lying one byte for byte as it was (no tensor holds anything but its own or the
# announced content), and its sync returns pcclRankConnectionLost; the source's own sync succeeds
# (it had nothing to fetch). The retry, from the now honest source, completes the receiver.
. "$(dirname "$0")/lib.sh"
start_master
common=(--world 2 --tensors 6 --bytes 6000000 --syncs 2)
"$BIN/ss_peer" "$PORT" "${common[@]}" --seed 1 --revision 3 --lie-after-ms 300 > "$WORK/src.log" 2> "$WORK/src.err" &
S=$!; PIDS+=($S)
# the receiver votes 1.5 s after the source: the lie is in place before anything is served
"$BIN/ss_peer" "$PORT" "${common[@]}" --seed 2 --revision 0 --expect-seed 1 --sync-delay-ms 1500 \
    --expect-result 8 > "$WORK/rcv.log" 2> "$WORK/rcv.err" &
R=$!; PIDS+=($R)
wait_pid "$R" 60; rr=$?
wait_pid "$S" 60; rs=$?
first() { grep '"event":"sync","i":0,' "$WORK/$1.log"; }
field0() { first "$1" | python3 -c "import json,sys; print(json.load(sys.stdin)['$2'])"; }
[ -n "$(first rcv)" ] || { cat "$WORK/rcv.err" >&2; fail "the receiver reported no sync"; }
[ "$(field0 rcv torn)" = 0 ] || fail "receiver: $(field0 rcv torn) tensor(s) hold bytes that are neither its own nor the announced ones: $(first rcv)"
[ "$(field0 rcv old)" = 1 ] && [ "$(field0 rcv new)" = 5 ] ||
    fail "receiver: expected the lying tensor kept and the 5 others taken: $(first rcv)"
[ "$(field0 rcv result)" = 8 ] || fail "receiver: first sync returned $(field0 rcv result), expected 8 (pcclRankConnectionLost)"
grep -q "hashes to" "$WORK/rcv.err" || fail "receiver did not log the hash mismatch"
[ "$(field0 src result)" = 0 ] || fail "source: first sync returned $(field0 src result), expected success"
[ "$rr" = 0 ] || { cat "$WORK/rcv.err" >&2; fail "receiver failed (exit $rr)"; }
[ "$rs" = 0 ] || { cat "$WORK/src.err" >&2; fail "source failed (exit $rs)"; }
[ "$(json_field "$WORK/rcv.log" done revision)" = 3 ] || fail "receiver did not adopt revision 3 on the retry"
[ "$(json_field "$WORK/rcv.log" done hash)" = "$(json_field "$WORK/src.log" done hash)" ] || fail "hashes differ after the retry"
echo "ok: the lying tensor was refused and left as it was; the retry completed the receiver"
