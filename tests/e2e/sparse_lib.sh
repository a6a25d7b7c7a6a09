# sparse_lib.sh - sourced by test_sparse*.sh after lib.sh.

# sparse_run WORLD SECONDS MODE [ARGS...]: runs sparse_peer IDs 0..WORLD-1 (logs s<ID>.log) and fails unless every
# one passes within SECONDS.
sparse_run() {
    local world=$1 limit=$2 id
    shift 2
    local -a pids=()
    for id in $(seq 0 $((world - 1))); do
        "$BIN/sparse_peer" "$PORT" "$id" "$world" "$@" > "$WORK/s$id.log" 2>&1 &
        pids+=($!); PIDS+=($!)
    done
    for id in $(seq 0 $((world - 1))); do wait_pid "${pids[$id]}" "$limit" || fail "sparse peer $id ($*) failed"; done
}

# sparse_same_hashes WORLD: every round's output hash is the same on every peer (bit-identical results).
sparse_same_hashes() {
    local id
    grep -o '^round [0-9]* world [0-9]* hash [0-9a-f]*' "$WORK/s0.log" > "$WORK/h0"
    [ -s "$WORK/h0" ] || fail "peer 0 printed no round"
    for id in $(seq 1 $(($1 - 1))); do
        grep -o '^round [0-9]* world [0-9]* hash [0-9a-f]*' "$WORK/s$id.log" | cmp -s - "$WORK/h0" ||
            fail "peer $id's outputs differ from peer 0's"
    done
}
