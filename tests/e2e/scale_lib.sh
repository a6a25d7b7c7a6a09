# scale_lib.sh - sourced by test_scale*.sh after lib.sh: many peers on one host join one run at once, train the
# synthetic workload through churn and end with one hash.

# run_scale N STEPS JOIN_S: N peers started together (the whole burst dials the master at once) must all be
# accepted within JOIN_S seconds; once peer 1 took 3 steps, 3 peers are SIGKILLed and 3 newcomers join; every
# peer still running reaches revision STEPS and exits 0 with one final hash.
run_scale() {
    local n=$1 steps=$2 join_s=$3 i t0 accepted
    local syn=(--workload synthetic --steps "$steps" --size 4096 --connect-timeout 120)
    PCCL_LOG_LEVEL=info start_master
    t0=$SECONDS
    local pids=()
    for i in $(seq 1 "$n"); do
        start_peer "p$i" "${syn[@]}" --min-world "$n"
        pids+=("$LAST_PID")
    done
    for _ in $(seq 1 $((join_s * 10))); do
        accepted=$(grep -c 'accepted into group' "$WORK/master.log")
        [ "$accepted" -ge "$n" ] && break
        sleep 0.1
    done
    [ "$accepted" -ge "$n" ] || fail "$accepted of $n peers accepted within $join_s s"
    echo "$n peers accepted in $((SECONDS - t0)) s"
    wait_events "$WORK/p1.log" step 3 120
    local killed=" 2 3 4 "
    for i in $killed; do kill -9 "${pids[$((i - 1))]}"; done
    for i in 1 2 3; do
        start_peer "new$i" "${syn[@]}"
        pids+=("$LAST_PID")
    done
    for _ in $(seq 1 1200); do
        [ "$(grep -c 'accepted into group' "$WORK/master.log")" -ge $((n + 3)) ] && break
        sleep 0.1
    done
    [ "$(grep -c 'accepted into group' "$WORK/master.log")" -ge $((n + 3)) ] || fail "the newcomers were not accepted"
    local names=()
    for i in $(seq 1 "$n"); do [[ $killed == *" $i "* ]] || names+=("p$i"); done
    names+=(new1 new2 new3)
    for i in "${!pids[@]}"; do
        [[ $killed == *" $((i + 1)) "* ]] && continue
        wait_pid "${pids[$i]}" 300 || fail "peer ${pids[$i]} exited with $?"
    done
    python3 - "$WORK" "$steps" "${names[@]}" <<'PY' || fail "the peers did not end together"
import json, sys
work, steps, names = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
ends = {}
for n in names:
    done = [json.loads(l) for l in open(f"{work}/{n}.log") if l.startswith('{') and '"event":"done"' in l]
    if not done or done[-1]["revision"] != steps: sys.exit(f"{n} did not reach revision {steps}")
    ends[n] = done[-1]["hash"]
if len(set(ends.values())) != 1: sys.exit(f"final hashes differ: {sorted(set(ends.values()))}")
PY
    echo "ok: $n peers joined at once, 3 killed and 3 joined, ${#names[@]} ended at revision $steps with one hash in $((SECONDS - t0)) s"
}
