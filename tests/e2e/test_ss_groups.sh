#!/usr/bin/env bash
# Two peer groups of 2 side by side on one master. Each group has its own ring,
# all-reduce and shared state: group 0 converges on seed 1, group 1 on seed 3
# (newcomers with zeros receive from their own group only), all-reduce sums stay
# within a group, and the attributes are global 4 / group 2 / 2 groups / largest 2.
. "$(dirname "$0")/lib.sh"
start_master
pids=()
peer() { # NAME GROUP SEED REVISION EXPECT_SEED AR_VALUE AR_SUM
    "$BIN/ss_peer" "$PORT" --world 4 --group "$2" --seed "$3" --revision "$4" --expect-seed "$5" \
        --tensors 24 --bytes 200000 --allreduce "$6" --expect-sum "$7" > "$WORK/$1.log" 2> "$WORK/$1.err" &
    pids+=($!); PIDS+=($!)
}
peer g0a 0 1 7 1 1 3
peer g0b 0 0 0 1 2 3
peer g1a 1 3 40 3 10 30
peer g1b 1 0 0 3 20 30
for p in "${pids[@]}"; do wait_pid "$p" 50 || { cat "$WORK"/*.err >&2; fail "a peer failed"; }; done
f() { json_field "$WORK/$1.log" done "$2"; }
for n in g0a g0b g1a g1b; do
    [ "$(f $n global_world)/$(f $n group_world)/$(f $n groups)/$(f $n largest_group)" = 4/2/2/2 ] ||
        fail "$n attributes $(f $n global_world)/$(f $n group_world)/$(f $n groups)/$(f $n largest_group)"
done
[ "$(f g0a hash)" = "$(f g0b hash)" ] || fail "group 0 hashes differ"
[ "$(f g1a hash)" = "$(f g1b hash)" ] || fail "group 1 hashes differ"
[ "$(f g0a hash)" != "$(f g1a hash)" ] || fail "the two groups ended with the same state"
[ "$(f g0b revision)" = 7 ] && [ "$(f g1b revision)" = 40 ] || fail "revisions are not per group"
total=$(f g0a state_bytes)
[ "$(f g0b rx)" = "$total" ] && [ "$(f g1b rx)" = "$total" ] || fail "newcomers did not receive exactly $total bytes"
[ "$(f g0a tx)" = "$total" ] && [ "$(f g1a tx)" = "$total" ] || fail "each group's source should send exactly $total bytes"
echo "ok: two groups, hashes $(f g0a hash) / $(f g1a hash), all-reduce 3 / 30, attributes 4/2/2/2"
