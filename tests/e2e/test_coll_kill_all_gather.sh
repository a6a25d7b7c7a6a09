#!/usr/bin/env bash
# SIGKILL a member in the middle of a all_gather, then a rejoin (coll_lib.sh).
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/coll_lib.sh"
coll_kill all_gather
