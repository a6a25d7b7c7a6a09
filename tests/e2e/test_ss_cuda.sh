#!/usr/bin/env bash
# CUDA shared state: tensors in GPU memory are hashed on the GPU and staged
# through a bounded host buffer; a newcomer receives the whole state (exact
# rx/tx, bytes checked after copying back). Placements may differ between
# peers (seed 004): GPU->GPU, CPU->GPU and GPU->CPU, and the hashes agree
# across devices. Needs a build with CUDA and a device: otherwise prints
# "SKIP: no CUDA device" and passes.
. "$(dirname "$0")/lib.sh"
start_master

# sync_pair OLD_CUDA NEW_CUDA: the old peer (revision 2) sends to a newcomer.
sync_pair() {
    local args=(--world 2 --tensors 12 --bytes $((24 << 20)))
    "$BIN/ss_peer" "$PORT" "${args[@]}" --cuda "$1" --seed 1 --revision 2 > "$WORK/old.log" 2> "$WORK/old.err" &
    local p0=$!; PIDS+=($p0)
    "$BIN/ss_peer" "$PORT" "${args[@]}" --cuda "$2" --seed 0 --revision 0 > "$WORK/new.log" 2> "$WORK/new.err" &
    local p1=$!; PIDS+=($p1)
    wait_pid "$p0" 50; local s0=$?
    wait_pid "$p1" 50; local s1=$?
    if [ $s0 = 77 ] || [ $s1 = 77 ]; then
        echo "SKIP: no CUDA device"
        exit 0
    fi
    [ $s0 = 0 ] && [ $s1 = 0 ] || { cat "$WORK"/*.err >&2; fail "placement $1->$2: a peer failed ($s0, $s1)"; }
    local total
    total=$(json_field "$WORK/old.log" done state_bytes)
    [ "$(json_field "$WORK/new.log" done rx)" = "$total" ] || fail "placement $1->$2: newcomer rx differs from $total"
    [ "$(json_field "$WORK/old.log" done tx)" = "$total" ] || fail "placement $1->$2: sender tx differs from $total"
    [ "$(json_field "$WORK/new.log" done hash)" = "$(json_field "$WORK/old.log" done hash)" ] \
        || fail "placement $1->$2: hashes differ"
    echo "ok: placement $1->$2 (1 = GPU): $total bytes synchronized"
}

sync_pair 1 1
sync_pair 0 1
sync_pair 1 0
