#!/usr/bin/env bash
# SIGKILL a member in the middle of a broadcast, then a rejoin (coll_kill.sh).
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/coll_kill.sh"
coll_kill broadcast
