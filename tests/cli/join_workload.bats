#!/usr/bin/env bats
# pccl join --workload fashion-mnist's compression and Streaming DiLoCo flags: bad values are usage errors before
# the master is contacted; --sparsify reaches the wire (fewer bytes) and the peers end with the same state.

load admin_helpers # setup, teardown (every PID in PEERS and the master), start_master

@test "join refuses bad --fragments, --overlap-steps and --sparsify values (exit 2, with the reason)" {
    check() { # check MESSAGE FLAGS...
        local msg=$1; shift
        run "$PCCL" join --master 127.0.0.1:1 "$@"
        [ "$status" -eq 2 ] || { echo "status $status for $*: $output"; return 1; }
        [[ "$output" == *"$msg"* ]] || { echo "no '$msg' for $*: $output"; return 1; }
    }
    check "bad value '0' for --fragments" --fragments 0
    check "--fragments 11 exceeds --inner-steps 10" --fragments 11 --inner-steps 10
    check "--overlap-steps 5 must be less than --inner-steps / --fragments = 5" --fragments 2 --inner-steps 10 --overlap-steps 5
    check "--fragments and --overlap-steps apply to --workload fashion-mnist" --workload synthetic --fragments 2
    for s in topk:0 topk:1.5 topk:-0.1 topk:nan topk:0.03:3 topk:0.03:8 topk bogus:0.1 topk:0.1:2:2; do
        check "bad value '$s' for --sparsify" --sparsify "$s"
    done
    check "--sparsify and --quantize exclude each other" --sparsify topk:0.03:2 --quantize minmax:uint2
    check "--sparsify applies to --workload fashion-mnist" --workload synthetic --sparsify topk:0.1
    for s in -0.1 1.5 nan x; do
        check "bad value '$s' for --sparse-decay" --sparsify topk:0.1 --sparse-decay "$s"
    done
    check "--sparse-decay applies with --sparsify" --sparse-decay 0.9
}

@test "join --sparsify with --fragments 2: a fraction of the dense bytes, equal hashes" {
    start_master
    args=(--master 127.0.0.1:"$PORT" --workload fashion-mnist --steps 2 --inner-steps 6 --fragments 2 --json
          --sparsify topk:0.03:2)
    "$PCCL" join "${args[@]}" --seed 1 > "$TMP/a.log" 2> "$TMP/a.err" &
    APID=$!
    PEERS+=("$APID")
    run timeout 60 "$PCCL" join "${args[@]}" --seed 2
    [ "$status" -eq 0 ]
    wait "$APID"
    APID=
    b=$(echo "$output" | grep '"event":"done"')
    a=$(grep '"event":"done"' "$TMP/a.log")
    field() { python3 -c 'import json,sys; print(json.loads(sys.argv[1])[sys.argv[2]])' "$1" "$2"; }
    [ -n "$a" ] && [ "$(field "$a" hash)" = "$(field "$b" hash)" ]
    [ "$(field "$a" sparsify)" = "topk:0.03:2" ] && [ "$(field "$a" fragments)" = 2 ]
    # Dense, 2 peers send each of the 101,770 floats once per outer step: 814,160 B in 2 steps.
    tx=$(field "$b" allreduce_tx_bytes)
    [ "${tx%.*}" -gt 0 ] && [ "${tx%.*}" -lt 81416 ]
}

@test "join --sparse-decay: equal hashes on both peers, a different result than the undecayed residual" {
    start_master
    runpair() { # runpair DECAY: two peers, 2 outer steps (the second selects from the residual); prints peer 2's done
        local args=(--master 127.0.0.1:"$PORT" --workload fashion-mnist --steps 2 --inner-steps 6 --json
                    --sparsify topk:0.03:2 --sparse-decay "$1")
        "$PCCL" join "${args[@]}" --seed 1 > "$TMP/a.log" 2> "$TMP/a.err" &
        APID=$!
        PEERS+=("$APID")
        timeout 60 "$PCCL" join "${args[@]}" --seed 2 > "$TMP/b.log" 2> "$TMP/b.err" || return 1
        wait "$APID" || return 1
        APID=
        a=$(grep '"event":"done"' "$TMP/a.log")
        b=$(grep '"event":"done"' "$TMP/b.log")
        [ -n "$a" ] && [ "$(field "$a" hash)" = "$(field "$b" hash)" ] || return 1
        echo "$b"
    }
    field() { python3 -c 'import json,sys; print(json.loads(sys.argv[1])[sys.argv[2]])' "$1" "$2"; }
    d1=$(runpair 1)
    d5=$(runpair 0.5)
    [ "$(field "$d5" sparse_decay)" = 0.5 ] && [ "$(field "$d1" sparse_decay)" = 1 ]
    [ "$(field "$d1" hash)" != "$(field "$d5" hash)" ]
}
