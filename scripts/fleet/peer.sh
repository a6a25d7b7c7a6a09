#!/usr/bin/env bash
# peer.sh - one spot-instance peer: runs `pccl join` in a restart loop.
# When the peer dies (its machine was preempted and came back, the master
# kicked it, the master was gone past the reconnect window, the network dropped)
# it rejoins after a backoff that doubles up to MAX_BACKOFF seconds, plus a
# random jitter of up to half of it (so peers that failed together do not all
# come back in the same instant), and resets after a run that lasted a while.
# Exit 0 ends the loop (the run reached its step count or was shut down, or the
# peer left it), and so do the exit codes that the same command line would get
# again (pccl-join(1)): 2, a usage error, and 4, a local configuration error
# (e.g. the dataset is missing).
# SIGTERM/SIGINT is forwarded: `pccl join` leaves the run cleanly, and the loop ends.
# Environment:
#   PCCL         the pccl binary (default: pccl on PATH)
#   MASTER       master control address (required): 10.0.0.1:48148, [2001:db8::1]:48148 or master.example:48148
#                (a name that does not resolve yet is exit 1 of pccl join, so the loop retries it)
#   MAX_BACKOFF  seconds, the longest backoff before jitter (default 60)
# Extra arguments go to `pccl join` (e.g. --workload fashion-mnist --steps 500).
set -uo pipefail
PCCL=${PCCL:-pccl}
MASTER=${MASTER:?set MASTER=HOST:PORT}
MAX_BACKOFF=${MAX_BACKOFF:-60}
if ! [[ "$MAX_BACKOFF" =~ ^[1-9][0-9]{0,5}$ ]]; then
    echo "peer.sh: MAX_BACKOFF=$MAX_BACKOFF is not a number of seconds (1 to 999999)" >&2
    exit 2
fi
backoff=1
child=
# Forward a stop to the current peer and end the loop instead of restarting.
trap 'stopping=1; [ -n "$child" ] && kill -TERM "$child" 2>/dev/null' INT TERM
stopping=0
while [ "$stopping" -eq 0 ]; do
    started=$(date +%s)
    "$PCCL" join --master "$MASTER" "$@" &
    child=$!
    wait "$child"
    rc=$?
    if [ "$stopping" -eq 1 ]; then
        # The signal interrupted wait; the peer is still leaving the run: wait for its exit code.
        wait "$child"
        exit $?
    fi
    child=
    if [ "$rc" -eq 0 ]; then
        echo "peer.sh: pccl join exited 0 (the run is over for this peer), not restarting" >&2
        exit 0
    fi
    if [ "$rc" -eq 2 ] || [ "$rc" -eq 4 ]; then
        [ "$rc" -eq 2 ] && what="usage error" || what="local configuration error"
        echo "peer.sh: $what (exit $rc), not retrying" >&2
        exit "$rc"
    fi
    # A peer that ran for a while earned a fresh start; one that dies at once backs off.
    [ $(( $(date +%s) - started )) -ge 60 ] && backoff=1
    jitter_ms=$(( RANDOM % (backoff * 500) ))
    delay_ms=$(( backoff * 1000 + jitter_ms ))
    echo "peer.sh: pccl join exited with $rc; rejoining in ${backoff}s (+${jitter_ms}ms jitter)" >&2
    sleep "$(( delay_ms / 1000 )).$(printf %03d $(( delay_ms % 1000 )))" &
    wait $! 2>/dev/null
    backoff=$(( backoff * 2 > MAX_BACKOFF ? MAX_BACKOFF : backoff * 2 ))
done
# stopped during a backoff: no peer was running
exit 0
