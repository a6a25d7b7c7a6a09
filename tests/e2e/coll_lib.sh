# coll_lib.sh - sourced by test_coll*.sh after lib.sh.

# coll_run WORLD MODE SECONDS: runs coll_peer IDs 0..WORLD-1 in MODE (logs c<ID>.log) and fails unless every one
# passes within SECONDS.
coll_run() {
    local world=$1 mode=$2 limit=$3 id
    local -a pids=()
    for id in $(seq 0 $((world - 1))); do
        "$BIN/coll_peer" "$PORT" "$id" "$world" "$mode" > "$WORK/c$id.log" 2>&1 &
        pids+=($!); PIDS+=($!)
    done
    for id in $(seq 0 $((world - 1))); do wait_pid "${pids[$id]}" "$limit" || fail "coll peer $id ($mode) failed"; done
}

# coll_kill KIND [WORLD] kills peer ID 1 of WORLD (default 3) in the middle of an operation of KIND (coll_peer.c
# kill), then, once the survivors ran one with WORLD - 1 members, starts ID WORLD, which joins. The master must
# abort the operation for everyone; the survivors check that their buffer (ID 0, in place) or input (ID 2, out of
# place) came back unchanged, retry, accept the joiner and finish 3 operations with it, each checked against the
# members its contents name.
coll_kill() {
    local kind=$1 world=${2:-3} id
    PCCL_LOG_LEVEL=debug start_master
    export PCCL_LOG_LEVEL=info
    local -a cp
    for id in $(seq 0 $((world - 1))); do
        "$BIN/coll_peer" "$PORT" "$id" "$world" kill "$kind" > "$WORK/c$id.log" 2>&1 &
        cp[$id]=$!; PIDS+=($!)
    done
    for _ in $(seq 1 1200); do [ "$(grep -c '^op ok' "$WORK/c0.log")" -ge 2 ] && break; sleep 0.05; done
    [ "$(grep -c '^op ok' "$WORK/c0.log")" -ge 2 ] || fail "no $kind completed on $world peers"
    kill_inside_op "${cp[1]}" 10 "$(grep -c commenced "$WORK/master.log")" || fail "no $kind was caught in progress"
    for _ in $(seq 1 1200); do grep -q "^op ok world $((world - 1)) " "$WORK/c0.log" && break; sleep 0.05; done
    grep -q '^op failed' "$WORK/c0.log" || fail "ID 0 saw no failed $kind"
    grep -q "^op ok world $((world - 1)) " "$WORK/c0.log" || fail "the $((world - 1)) survivors ran no $kind"
    "$BIN/coll_peer" "$PORT" "$world" "$world" kill "$kind" > "$WORK/c$world.log" 2>&1 &
    cp[$world]=$!; PIDS+=($!)
    for id in 0 $(seq 2 "$world"); do wait_pid "${cp[$id]}" 60 || fail "ID $id exited with $?"; done
    grep -q "aborting" "$WORK/master.log" || fail "the kill did not land inside an operation (no abort logged)"
    grep -q "^op failed: buffer restored" "$WORK/c0.log" || fail "ID 0 (in place) saw no failed $kind"
    grep -q "^op failed: input restored" "$WORK/c2.log" || fail "ID 2 (out of place) saw no failed $kind"
    echo "ok: $kind aborted by a kill, restored, retried by $((world - 1)) and run with the joiner"
}
