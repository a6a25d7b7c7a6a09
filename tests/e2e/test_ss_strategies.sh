#!/usr/bin/env bash
# Shared-state strategies end to end (seed 002), 200 tensors of all 12 dtypes:
#  A: one ENFORCE_POPULAR peer vs two RECEIVE_ONLY peers holding other content:
#     the RECEIVE_ONLY majority never wins, they receive everything and send 0 bytes;
#  B: one SEND_ONLY peer vs two ENFORCE_POPULAR peers holding other content:
#     the SEND_ONLY content wins, that peer receives 0 bytes;
#  C: a newcomer (revision 0, all zeros, odd tensor sizes) takes everything from two
#     up-to-date peers: its rx and their summed tx equal the state's byte count;
#  D: two SEND_ONLY peers with different content: both calls fail with pcclInvalidUsage
#     and the master kicks both; the ENFORCE_POPULAR peer keeps its own state.
# tx/rx must equal the exact byte sums; every peer checks its bytes against the expected content.
. "$(dirname "$0")/lib.sh"
SSP="$BIN/ss_peer"
common=(--world 3 --tensors 200 --bytes 3000000)

run3() { # run3 TAG ARGS0 -- ARGS1 -- ARGS2 : three peers on a fresh master
    local tag=$1; shift
    start_master
    local i=0 args=() pids=()
    for a in "$@" --; do
        if [ "$a" = -- ]; then
            "$SSP" "$PORT" "${common[@]}" "${args[@]}" > "$WORK/$tag$i.log" 2> "$WORK/$tag$i.err" &
            pids+=($!); PIDS+=($!); args=(); i=$((i + 1))
        else args+=("$a"); fi
    done
    for k in 0 1 2; do wait_pid "${pids[$k]}" 50 || { cat "$WORK/$tag$k.err" >&2; fail "$tag peer $k failed"; }; done
    # the next master reuses master.log: this one must be gone before it starts
    kill "$MASTER_PID" 2>/dev/null
    wait_pid "$MASTER_PID" 10 >/dev/null 2>&1
}
field() { json_field "$WORK/$1.log" done "$2"; }

run3 a --seed 1 --revision 5 -- --seed 2 --revision 5 --strategy recv --expect-seed 1 -- --seed 2 --revision 5 --strategy recv --expect-seed 1
total=$(field a0 state_bytes)
[ "$(field a0 tx)" = $((2 * total)) ] || fail "A: popular peer sent $(field a0 tx), expected $((2 * total))"
[ "$(field a0 rx)" = 0 ] || fail "A: popular peer received bytes"
for k in 1 2; do
    [ "$(field a$k tx)" = 0 ] || fail "A: RECEIVE_ONLY peer $k sent $(field a$k tx) bytes"
    [ "$(field a$k rx)" = "$total" ] || fail "A: RECEIVE_ONLY peer $k received $(field a$k rx), expected $total"
    [ "$(field a$k hash)" = "$(field a0 hash)" ] || fail "A: peer $k hash differs"
done

run3 b --seed 1 --revision 9 --strategy send -- --seed 2 --revision 9 --expect-seed 1 -- --seed 2 --revision 9 --expect-seed 1
[ "$(field b0 rx)" = 0 ] || fail "B: SEND_ONLY peer received $(field b0 rx) bytes"
[ "$(field b0 tx)" = $((2 * total)) ] || fail "B: SEND_ONLY peer sent $(field b0 tx), expected $((2 * total))"
for k in 1 2; do
    [ "$(field b$k rx)" = "$total" ] || fail "B: peer $k received $(field b$k rx), expected $total"
    [ "$(field b$k hash)" = "$(field b0 hash)" ] || fail "B: peer $k hash differs"
done
common=(--world 3 --tensors 200 --bytes 2999999)
run3 c --seed 4 --revision 12 --expect-seed 4 -- --seed 4 --revision 12 --expect-seed 4 -- --seed 0 --revision 0 --expect-seed 4
total_c=$(field c0 state_bytes)
[ "$(field c2 rx)" = "$total_c" ] || fail "C: newcomer received $(field c2 rx), expected $total_c"
[ $(( $(field c0 tx) + $(field c1 tx) )) = "$total_c" ] || fail "C: sources sent $(field c0 tx) + $(field c1 tx), expected $total_c"
[ "$(field c0 rx)$(field c1 rx)$(field c2 tx)" = 000 ] || fail "C: unexpected transfers"
[ "$(field c2 revision)" = 12 ] && [ "$(field c2 hash)" = "$(field c0 hash)" ] || fail "C: newcomer not up to date"
common=(--world 3 --tensors 20 --bytes 100000)
run3 d --seed 5 --revision 1 --strategy send --expect-seed 5 --expect-result 4 -- \
       --seed 6 --revision 1 --strategy send --expect-seed 6 --expect-result 4 -- --seed 7 --revision 1 --expect-seed 7
[ "$(grep -c 'kicking peer.*SEND_ONLY' "$WORK/master.log")" = 2 ] || fail "D: the master did not kick both SEND_ONLY peers"
[ "$(field d0 tx)$(field d0 rx)$(field d1 tx)$(field d1 rx)$(field d2 rx)" = 00000 ] || fail "D: bytes moved"
echo "ok: RECEIVE_ONLY peers took the popular state and sent 0 bytes; SEND_ONLY peer won and received 0 bytes ($total bytes in 200 tensors); newcomer got $total_c bytes exactly; disagreeing SEND_ONLY peers kicked"
