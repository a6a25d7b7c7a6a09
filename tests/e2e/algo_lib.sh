# algo_lib.sh - sourced after lib.sh by the tests of the algorithms by regime (docs/algorithms.md).

# algo_count ALGO: the all-reduces the master has commenced with ALGO (ring, rhd, rd) so far (its debug log).
algo_count() { grep -c "commenced: all_reduce,.*, $1$" "$WORK/master.log"; }

# ops_round WORLD ALGO: the ops peers of one world (ALGO empty: PCCL_ALGO unset), each checking every result
# exactly; sets RING, RHD and RD, the all-reduces the master commenced with each meanwhile.
ops_round() {
    local W=$1 algo=$2 pids=() r ring0 rhd0 rd0
    ring0=$(algo_count ring) rhd0=$(algo_count rhd) rd0=$(algo_count rd)
    for r in $(seq 0 $((W - 1))); do
        if [ -n "$algo" ]; then PCCL_ALGO=$algo "$BIN/ops_peer" "$PORT" "$r" "$W" > "$WORK/ops$W$algo-$r.log" 2>&1 &
        else env -u PCCL_ALGO "$BIN/ops_peer" "$PORT" "$r" "$W" > "$WORK/ops$W-$r.log" 2>&1 & fi
        pids+=($!); PIDS+=($!)
    done
    for r in $(seq 0 $((W - 1))); do wait_pid "${pids[$r]}" 240 || fail "ops peer $r of $W (PCCL_ALGO=$algo) failed"; done
    RING=$(($(algo_count ring) - ring0)) RHD=$(($(algo_count rhd) - rhd0)) RD=$(($(algo_count rd) - rd0))
}

# quant_round WORLD [low]: quant_peer.c on WORLD peers (PCCL_ALGO as exported), every result within its bound
# (checked by each peer) and the per-tag hashes of every peer equal to peer 0's.
quant_round() {
    local W=$1 mode=${2:-} pids=() r n
    for r in $(seq 0 $((W - 1))); do
        "$BIN/quant_peer" "$PORT" "$r" "$W" "$WORK/h$W-$r.txt" $mode > "$WORK/q$W-$r.log" 2>&1 &
        pids+=($!); PIDS+=($!)
    done
    for r in $(seq 0 $((W - 1))); do
        wait_pid "${pids[$r]}" 120 || { tail -5 "$WORK/q$W-$r.log" >&2; fail "quant peer $r of $W failed"; }
    done
    n=$(wc -l < "$WORK/h$W-0.txt")
    [ "$n" -ge 200 ] || fail "$W peers: only $n results hashed"
    for r in $(seq 1 $((W - 1))); do
        cmp -s "$WORK/h$W-0.txt" "$WORK/h$W-$r.txt" || {
            diff "$WORK/h$W-0.txt" "$WORK/h$W-$r.txt" | head -5 >&2
            fail "$W peers: peer $r ended with different bits than peer 0"
        }
    done
    echo "$W peers: $n results bit-identical"
}

# forced_rounds ALGO WORLD...: ops_round WORLD ALGO for each world; every all-reduce of each ran ALGO (at least
# 300 of them), none another algorithm.
forced_rounds() {
    local algo=$1 W n
    shift
    for W in "$@"; do
        ops_round "$W" "$algo"
        case $algo in ring) n=$RING ;; rhd) n=$RHD ;; rd) n=$RD ;; esac
        [ "$n" -ge 300 ] && [ $((RING + RHD + RD)) = "$n" ] ||
            fail "$W peers forced $algo: $RD rd, $RHD rhd and $RING ring all-reduces"
    done
}
