#!/usr/bin/env bash
# A source SIGKILLed in the middle of a large transfer (96 MiB in 24 tensors; ss_peer
# --die-after-sent kills the up-to-date peer that serves once it has sent 20 MiB): as in PCCL 1.0,
# the surviving up-to-date peer's sync succeeds and completes the revision, the receiver's returns
# pcclRankConnectionLost with no tensor torn (each holds its own or the elected bytes), and its
# retry, served by the survivor, ends with the elected bytes at the group's revision.
. "$(dirname "$0")/lib.sh"
start_master
common=(--world 3 --tensors 24 --bytes 100663296 --syncs 2)
# Both up-to-date peers are armed (either may be picked as the source); only the first sync is.
for k in 0 1; do
    "$BIN/ss_peer" "$PORT" "${common[@]}" --seed 1 --revision 3 --die-after-sent 20971520 > "$WORK/up$k.log" 2> "$WORK/up$k.err" &
    UP[$k]=$!; PIDS+=($!)
done
"$BIN/ss_peer" "$PORT" "${common[@]}" --seed 2 --revision 0 --expect-seed 1 --expect-result 8 > "$WORK/rcv.log" 2> "$WORK/rcv.err" &
R=$!; PIDS+=($R)
wait_pid "$R" 120; rr=$?
wait_pid "${UP[0]}" 60; r0=$?
wait_pid "${UP[1]}" 60; r1=$?
first() { grep '"event":"sync","i":0,' "$WORK/$1.log"; }
field0() { first "$1" | python3 -c "import json,sys; print(json.load(sys.stdin)['$2'])"; }
case "$r0$r1" in
    1370) S=up1 ;;
    0137) S=up0 ;;
    *) fail "expected exactly one up-to-date peer killed (exit 137), got exits $r0 and $r1" ;;
esac
[ -n "$(first rcv)" ] || { cat "$WORK/rcv.err" >&2; fail "the receiver reported no sync"; }
[ "$(field0 rcv result)" = 8 ] || fail "receiver: first sync returned $(field0 rcv result), expected 8 (pcclRankConnectionLost)"
[ "$(field0 rcv torn)" = 0 ] || fail "receiver: $(field0 rcv torn) tensor(s) torn by the killed transfer: $(first rcv)"
[ "$(field0 rcv old)" -ge 1 ] || fail "receiver: no tensor left to fetch: the kill came after the transfer: $(first rcv)"
[ "$(field0 "$S" result)" = 0 ] || fail "surviving up-to-date peer: first sync returned $(field0 "$S" result), expected success"
[ "$(field0 "$S" revision)" = 3 ] || fail "surviving up-to-date peer: revision $(field0 "$S" revision) after its sync"
[ "$rr" = 0 ] || { cat "$WORK/rcv.err" >&2; fail "receiver failed (exit $rr)"; }
[ "$(json_field "$WORK/rcv.log" done revision)" = 3 ] || fail "receiver did not adopt revision 3 on the retry"
[ "$(json_field "$WORK/rcv.log" done hash)" = "$(json_field "$WORK/$S.log" done hash)" ] || fail "hashes differ after the retry"
echo "ok: source killed mid-transfer ($(field0 rcv new) of 24 tensors landed, $(field0 rcv old) kept); survivor succeeded, receiver retried"
