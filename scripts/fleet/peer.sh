#!/usr/bin/env bash
# peer.sh - one spot-instance peer: runs `pccl join` in a restart loop.
# When the peer dies (its machine was preempted and came back, the master
# kicked it, the master restarted, the network dropped) it rejoins after a
# backoff that doubles up to MAX_BACKOFF seconds and resets after a run that
# lasted a while. A clean exit (the run reached its step count) ends the loop,
# and so do the exit codes that the same command line would get again (pccl-join(1)):
# 2, a usage error, and 4, a local configuration error (e.g. the dataset is missing).
# SIGTERM/SIGINT is forwarded: `pccl join` leaves the run cleanly, and the loop ends.
# Environment:
#   PCCL         the pccl binary (default: pccl on PATH)
#   MASTER       master control address (required): 10.0.0.1:48148, [2001:db8::1]:48148 or master.example:48148
#                (a name that does not resolve yet is exit 1 of pccl join, so the loop retries it)
#   MAX_BACKOFF  seconds (default 60)
# Extra arguments go to `pccl join` (e.g. --workload fashion-mnist --steps 500).
set -uo pipefail
PCCL=${PCCL:-pccl}
MASTER=${MASTER:?set MASTER=HOST:PORT}
MAX_BACKOFF=${MAX_BACKOFF:-60}
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
        echo "peer.sh: run finished" >&2
        exit 0
    fi
    if [ "$rc" -eq 2 ] || [ "$rc" -eq 4 ]; then
        [ "$rc" -eq 2 ] && what="usage error" || what="local configuration error"
        echo "peer.sh: $what (exit $rc), not retrying" >&2
        exit "$rc"
    fi
    # A peer that ran for a while earned a fresh start; one that dies at once backs off.
    [ $(( $(date +%s) - started )) -ge 60 ] && backoff=1
    echo "peer.sh: pccl join exited with $rc; rejoining in ${backoff}s" >&2
    sleep "$backoff" &
    wait $! 2>/dev/null
    backoff=$(( backoff * 2 > MAX_BACKOFF ? MAX_BACKOFF : backoff * 2 ))
done
# stopped during a backoff: no peer was running
exit 0
