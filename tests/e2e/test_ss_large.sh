#!/usr/bin/env bash
# Large shared state: a newcomer (revision 0, all zeros) receives every tensor of a
# 12-dtype state from the up-to-date peer, each tensor checked in a buffer before it lands.
# Default 256 MiB; PCCL_SS_LARGE_GIB=2 runs the 2 GiB figure of the issue. Checks exact
# tx/rx, bit-equality, and reports time and peak RSS of each peer (/usr/bin/time -v):
# the receiver's should exceed the state by one tensor; a second copy would show twice the state.
. "$(dirname "$0")/lib.sh"
bytes=$(( ${PCCL_SS_LARGE_GIB:-0} > 0 ? PCCL_SS_LARGE_GIB << 30 : 256 << 20 ))
timer=(); [ -x /usr/bin/time ] && timer=(/usr/bin/time -v)
start_master
args=(--world 2 --tensors 12 --bytes "$bytes")
start=$(date +%s.%N)
"${timer[@]}" "$BIN/ss_peer" "$PORT" "${args[@]}" --seed 1 --revision 3 > "$WORK/old.log" 2> "$WORK/old.err" &
P0=$!; PIDS+=($P0)
"${timer[@]}" "$BIN/ss_peer" "$PORT" "${args[@]}" --seed 0 --revision 0 > "$WORK/new.log" 2> "$WORK/new.err" &
P1=$!; PIDS+=($P1)
limit=$(( bytes >> 30 ? 240 : 50 ))
wait_pid "$P0" "$limit" || { cat "$WORK/old.err" >&2; fail "up-to-date peer failed"; }
wait_pid "$P1" "$limit" || { cat "$WORK/new.err" >&2; fail "newcomer failed"; }
secs=$(echo "$(date +%s.%N) - $start" | bc 2>/dev/null || echo "?")
total=$(json_field "$WORK/old.log" done state_bytes)
[ "$(json_field "$WORK/old.log" done tx)" = "$total" ] || fail "sender tx $(json_field "$WORK/old.log" done tx) != $total"
[ "$(json_field "$WORK/new.log" done rx)" = "$total" ] || fail "newcomer rx $(json_field "$WORK/new.log" done rx) != $total"
[ "$(json_field "$WORK/new.log" done tx)" = 0 ] || fail "newcomer sent bytes"
[ "$(json_field "$WORK/new.log" done revision)" = 3 ] || fail "newcomer did not adopt revision 3"
[ "$(json_field "$WORK/new.log" done hash)" = "$(json_field "$WORK/old.log" done hash)" ] || fail "hashes differ"
rss() { grep -o 'Maximum resident set size (kbytes): [0-9]*' "$1" | grep -o '[0-9]*$' || echo "?"; }
sync_ms=$(json_field "$WORK/new.log" done sync_ms)
echo "ok: $total bytes in 12 tensors to a newcomer: sync ${sync_ms} ms, whole run ${secs}s; peak RSS sender $(rss "$WORK/old.err") kB, newcomer $(rss "$WORK/new.err") kB"
