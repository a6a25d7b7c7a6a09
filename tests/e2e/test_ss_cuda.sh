#!/usr/bin/env bash
# CUDA shared state: tensors in GPU memory are hashed on the GPU and staged
# through a bounded host buffer; a newcomer's GPU tensors receive the whole
# state (exact rx/tx, bytes checked after copying back). Needs a build with
# CUDA and a device: otherwise prints "SKIP: no CUDA device" and passes.
. "$(dirname "$0")/lib.sh"
start_master
args=(--world 2 --tensors 12 --bytes $((24 << 20)) --cuda 1)
"$BIN/ss_peer" "$PORT" "${args[@]}" --seed 1 --revision 2 > "$WORK/old.log" 2> "$WORK/old.err" &
P0=$!; PIDS+=($P0)
"$BIN/ss_peer" "$PORT" "${args[@]}" --seed 0 --revision 0 > "$WORK/new.log" 2> "$WORK/new.err" &
P1=$!; PIDS+=($P1)
wait_pid "$P0" 50; s0=$?
wait_pid "$P1" 50; s1=$?
if [ $s0 = 77 ] || [ $s1 = 77 ]; then
    echo "SKIP: no CUDA device"
    exit 0
fi
[ $s0 = 0 ] && [ $s1 = 0 ] || { cat "$WORK"/*.err >&2; fail "a CUDA peer failed ($s0, $s1)"; }
total=$(json_field "$WORK/old.log" done state_bytes)
[ "$(json_field "$WORK/new.log" done rx)" = "$total" ] || fail "newcomer rx differs from $total"
[ "$(json_field "$WORK/old.log" done tx)" = "$total" ] || fail "sender tx differs from $total"
[ "$(json_field "$WORK/new.log" done hash)" = "$(json_field "$WORK/old.log" done hash)" ] || fail "hashes differ"
echo "ok: $total bytes of CUDA tensors synchronized through host staging"
