#!/usr/bin/env bash
# bench/ss_join.sh - how long a newcomer's join (its first shared-state sync) takes from 1 source and
# from N sources, with and without one source SIGKILLed half-way through its share.
#
# usage: bench/ss_join.sh BIN_DIR [REPS]      (median of REPS runs per row, default 3)
# env:   SSJ_MIB (1024: the state, in SSJ_TENSORS (16) equal tensors), SSJ_SOURCES (4),
#        SSJ_RATE_MBIT (1000: each source's link to the receiver)
#
# Links: every source runs with bench/pace_preload.so, which paces each TCP connection it accepts
# to SSJ_RATE_MBIT (SO_MAX_PACING_RATE, the kernel's own TCP pacing), so each source -> receiver
# link is rate-limited and the receiver's downlink is not: this kernel has neither sch_netem nor
# sch_tbf, and the userspace wanemu forwarder would need more CPU than the 2 shared cores have at
# several Gbit/s in total. Loopback, no added delay. Peers are tests/e2e/ss_peer (sources seed 1 at
# revision 3, the newcomer all zeros at revision 0); the time is the newcomer's sync call, which it
# makes 1.5 s after the others (--sync-delay-ms), so that it measures the plan, the transfer and the
# end of the sync rather than the sources hashing their state; every run checks that it received
# exactly the state's size and holds the elected bytes.
# Processes are started and stopped by PID (tests/e2e/lib.sh).
set -u
. "$(dirname "$0")/../tests/e2e/lib.sh"
REPS=${2:-3}
MIB=${SSJ_MIB:-1024}
NT=${SSJ_TENSORS:-16}
NS=${SSJ_SOURCES:-4}
RATE=${SSJ_RATE_MBIT:-1000}
BYTES=$((MIB << 20))
PRELOAD="$BIN/pace_preload.so"
[ -f "$PRELOAD" ] || fail "no $PRELOAD (build target pace_preload)"
[ -x "$BIN/ss_peer" ] || fail "no $BIN/ss_peer (tests/e2e)"

# run SOURCES KILL: sets RES to the newcomer's sync time in ms, or FAILED
run() {
    local n=$1 kill=$2 k pids=() common rcv
    start_master
    common=(--world $((n + 1)) --tensors "$NT" --bytes "$BYTES")
    for k in $(seq 0 $((n - 1))); do
        local die=()
        [ "$kill" = 1 ] && [ "$k" = 0 ] && die=(--die-after-sent $((BYTES / n / 2)))
        # through sh, so that the SIGKILL of the armed source is its exit status, not a message of this shell
        LD_PRELOAD="$PRELOAD" PCCL_BENCH_PACE_MBIT="$RATE" sh -c '"$@"; exit $?' sh "$BIN/ss_peer" "$PORT" \
            "${common[@]}" --seed 1 --revision 3 "${die[@]}" > "$WORK/src$k.log" 2> "$WORK/src$k.err" &
        pids+=($!); PIDS+=($!)
    done
    ${SSJ_TIME:+/usr/bin/time -v} "$BIN/ss_peer" "$PORT" "${common[@]}" --seed 0 --revision 0 --sync-delay-ms 1500 > "$WORK/rcv.log" \
        2> "$WORK/rcv.err" &
    rcv=$!; PIDS+=($rcv)
    local ok=1
    wait_pid "$rcv" 300 || ok=0
    for k in "${pids[@]}"; do wait_pid "$k" 60 >/dev/null 2>&1; done # the killed one: 137
    kill -TERM "$MASTER_PID" 2>/dev/null; wait "$MASTER_PID" 2>/dev/null
    local rx ms
    rx=$(json_field "$WORK/rcv.log" done rx)
    ms=$(json_field "$WORK/rcv.log" done sync_ms)
    if [ "$ok" = 1 ] && [ "$rx" = "$(json_field "$WORK/rcv.log" done state_bytes)" ]; then RES=$ms
    else RES=FAILED; tail -n 3 "$WORK/rcv.err" >&2; fi
}

median() { python3 -c 'import statistics,sys; v=[float(x) for x in sys.argv[1:] if x!="FAILED"]; print(f"{statistics.median(v):.0f}" if len(v)==len(sys.argv[1:]) else "FAILED")' "$@"; }

echo "join of $MIB MiB in $NT tensors, each source link paced to $RATE Mbit/s, median of $REPS; $(uptime)"
printf '%-34s %10s %12s %10s\n' "scenario" "join ms" "Gbit/s" "vs 1 src"
base=
for row in "1 0" "$NS 0" "$NS 1"; do
    set -- $row
    times=()
    for _ in $(seq "$REPS"); do run "$1" "$2"; times+=("$RES"); done
    med=$(median "${times[@]}")
    label="$1 source(s)"; [ "$2" = 1 ] && label="$label, one killed half-way"
    if [ "$med" = FAILED ]; then printf '%-34s %10s\n' "$label" FAILED; continue; fi
    [ -z "$base" ] && base=$med
    extra=; [ "$2" = 1 ] && [ -n "${nokill:-}" ] && extra=$(printf ', %+.1f%% vs no kill' "$(echo "($med / $nokill - 1) * 100" | bc -l)")
    [ "$2" = 0 ] && nokill=$med
    printf '%-34s %10s %12.2f %9.2fx   (runs: %s%s)\n' "$label" "$med" "$(echo "$BYTES * 8 / $med / 1000000" | bc -l)" \
        "$(echo "$base / $med" | bc -l)" "${times[*]}" "$extra"
done
