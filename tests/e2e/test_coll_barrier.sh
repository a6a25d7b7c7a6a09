#!/usr/bin/env bash
# Barriers on 3 peers (coll_peer.c barrier): a member that enters late holds the others back; ranked and unranked;
# several async barriers at once, and the with-retry form.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/coll_lib.sh"
start_master
coll_run 3 barrier 60
echo "ok: barriers held every member until the last entered"
