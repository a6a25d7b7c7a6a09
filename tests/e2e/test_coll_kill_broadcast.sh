#!/usr/bin/env bash
# SIGKILL a member in the middle of a broadcast, then a rejoin (coll_lib.sh).
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/coll_lib.sh"
coll_kill broadcast
