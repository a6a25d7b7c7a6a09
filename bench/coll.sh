#!/usr/bin/env bash
# bench/coll.sh - pccl's broadcast, all-gather and reduce-scatter against Gloo and OpenMPI, in K
# interleaved rounds per point and kind: each round runs pccl (out of place, then in place), Gloo and OpenMPI
# back to back, so a slow phase of a shared machine hits all of them. Writes the RESULT lines (mode=coll
# round=k) to --results and the markdown section (report.py --coll) to --md; prints the table.
#
# usage: bench/coll.sh --bin DIR [--rounds K] [--reps N] [--points "PEERS:BYTES ..."] [--kinds "..."]
#                      [--impls "pccl pccl-ip gloo mpi"] [--wan] [--results FILE] [--md FILE]
#
#   --bin     directory with pccl_coll (and gloo_coll, mpi_coll where built), e.g. build/bin
#   --rounds  rounds per point and kind (default 3)
#   --reps    timed repetitions per run (default 3; x6 with 3 warm-ups up to 16 MiB: bench/lib.sh)
#   --points  default "2:16777216 4:16777216 8:16777216 2:268435456 4:268435456 8:268435456"
#   --kinds   default "broadcast all_gather reduce_scatter"
#   --impls   in round order (default "pccl pccl-ip gloo mpi"; pccl-ip is pccl in place; a missing comparator
#             binary is skipped)
#   --wan     also the WAN series (root): bench/wan.sh with WAN_COLL=broadcast, 8 members (the root and
#             7 peers) x 256 MiB with a pool of 1 and of 8, next to 256 MiB sent once over one emulated
#             link (one stream and 8); on a clean path and a lossy one (0.01 % loss, cubic, MTU 1500);
#             WAN_RATE (default 200mbit here) passes through
#   --results RESULT lines of this run (default /tmp/pcclb-coll-results.txt, overwritten)
#   --md      markdown section written (default bench/coll.md, included by docs/benchmarks.md)
#
# BYTES is the collective's size as nccl-tests counts it: the broadcast buffer, the all-gather's output,
# the reduce-scatter's input (each member's block is BYTES / PEERS); throughput = BYTES / time.
set -u
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BIN="" ROUNDS=3 REPS=3 WAN=0
POINTS="2:16777216 4:16777216 8:16777216 2:268435456 4:268435456 8:268435456"
KINDS="broadcast all_gather reduce_scatter"
IMPLS="pccl pccl-ip gloo mpi"
RES=/tmp/pcclb-coll-results.txt MD=$ROOT/bench/coll.md
while [ $# -gt 0 ]; do
    case $1 in
    --bin) BIN=$2; shift ;;
    --rounds) ROUNDS=$2; shift ;;
    --reps) REPS=$2; shift ;;
    --points) POINTS=$2; shift ;;
    --kinds) KINDS=$2; shift ;;
    --impls) IMPLS=$2; shift ;;
    --wan) WAN=1 ;;
    --results) RES=$2; shift ;;
    --md) MD=$2; shift ;;
    -h | --help) sed -n '2,24p' "$0"; exit 0 ;;
    *) echo "coll.sh: unknown argument $1" >&2; exit 2 ;;
    esac
    shift
done
for v in "$ROUNDS" "$REPS"; do
    case $v in '' | *[!0-9]* | 0) echo "coll.sh: '$v' is not a positive integer" >&2; exit 2 ;; esac
done
for k in $KINDS; do
    case $k in broadcast | all_gather | reduce_scatter) ;; *) echo "coll.sh: unknown kind $k" >&2; exit 2 ;; esac
done
for impl in $IMPLS; do
    case $impl in pccl | pccl-ip | gloo | mpi) ;; *) echo "coll.sh: unknown implementation $impl" >&2; exit 2 ;; esac
done
for pt in $POINTS; do
    case $pt in [0-9]*:[0-9]*) ;; *) echo "coll.sh: point '$pt' is not PEERS:BYTES" >&2; exit 2 ;; esac
    n=${pt%%:*} s=${pt#*:}
    if [ "$n" -lt 2 ] || [ $((s % (4 * n))) != 0 ]; then
        echo "coll.sh: point $pt: want PEERS >= 2 and BYTES a multiple of 4 x PEERS" >&2; exit 2
    fi
done
case " $IMPLS " in *" pccl "* | *" pccl-ip "*)
    [ -x "$BIN/pccl_coll" ] || { echo "coll.sh: no pccl_coll in '$BIN' (--bin)" >&2; exit 2; } ;;
esac

# shellcheck source=bench/lib.sh
. "$ROOT/bench/lib.sh"
log() { echo "[$(date -u +%H:%M:%S) load $(cut -d' ' -f1 /proc/loadavg)] $*" >&2; }
START=$(date -u +%Y-%m-%dT%H:%M:%SZ) LOAD_START=$(cut -d' ' -f1-3 /proc/loadavg) T0=$(date +%s)
TMP=$(mktemp -d /tmp/pcclb-coll-XXXXXX)
trap 'rm -rf "$TMP"' EXIT
: >"$RES"
for pt in $POINTS; do
    n=${pt%%:*} s=${pt#*:}
    reps_for "$s" "$REPS"
    for kind in $KINDS; do
        for k in $(seq 1 "$ROUNDS"); do
            log "$kind, $n peers x $s B, round $k/$ROUNDS"
            for impl in $IMPLS; do
                case $impl in
                pccl) cmd=("$BIN/pccl_coll" oop "$kind" "$n" "$s" "$r" "$warm") ;;
                pccl-ip) cmd=("$BIN/pccl_coll" ip "$kind" "$n" "$s" "$r" "$warm") ;;
                gloo) [ -x "$BIN/gloo_coll" ] || continue; cmd=("$BIN/gloo_coll" "$kind" "$n" "$s" "$r" "$warm") ;;
                mpi) [ -x "$BIN/mpi_coll" ] || continue
                    cmd=("${MPIRUN[@]}" -np "$n" "$BIN/mpi_coll" "$kind" "$s" "$r" "$warm") ;;
                esac
                # Bounded: a hung run is killed and recorded as failed; the round goes on.
                if out=$(timeout 900 "${cmd[@]}" 2>"$TMP/err") && grep -q '^RESULT' <<<"$out"; then
                    grep '^RESULT' <<<"$out" | sed "s/ mode=coll / mode=coll round=$k /" >>"$RES"
                else
                    echo "RESULT impl=$impl mode=coll round=$k coll=$kind peers=$n bytes=$s status=FAILED" >>"$RES"
                    { echo "== $impl $kind $n x $s round $k"; grep -v HEARTBEAT "$TMP/err" | tail -5; } >&2
                fi
            done
        done
    done
done

if [ "$WAN" = 1 ]; then
    # Two paths: a clean one (one stream fills the link) and a lossy one, where one stream is
    # loss-limited and the pool's connections add up.
    for scen in clean lossy; do
        log "WAN ($scen): broadcast of 256 MiB to 7 peers, pool 1 and 8, and one link"
        if [ $scen = clean ]; then set --; else set -- WAN_LOSS=0.01% WAN_CC=cubic WAN_MTU=1500; fi
        env WAN_TAG=$scen WAN_COLL=broadcast WAN_LINK=1 WAN_POOL=1 WAN_PEERS=8 WAN_BYTES=268435456 \
            WAN_RATE="${WAN_RATE:-200mbit}" WAN_PREFIX="${WAN_PREFIX:-pcbco}" "$@" "$ROOT/bench/wan.sh" "$BIN" 1 "1 8" \
            >>"$RES" || log "WAN series ($scen) failed"
    done
fi

{
    echo "META start=$START load_start=${LOAD_START// /_} load_end=$(cut -d' ' -f1-3 /proc/loadavg | tr ' ' _)" \
        "duration_s=$(($(date +%s) - T0)) rounds=$ROUNDS reps=$REPS git=$(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null)"
    cat "$RES"
} >"$TMP/all.txt"
python3 "$ROOT/bench/report.py" --coll "$TMP/all.txt" >"$MD" || exit 1
cat "$MD"
