#!/usr/bin/env bash
# SIGKILL a member in the middle of a all_gather_v, then a rejoin (coll_kill.sh).
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/coll_kill.sh"
coll_kill all_gather_v
