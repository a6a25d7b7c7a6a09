#!/usr/bin/env bash
# master.sh - runs the run's master with an admin token, in the foreground.
# Creates the token file on first use (mode 600) so kick/shutdown work only for
# whoever can read it. Environment:
#   PCCL        the pccl binary (default: pccl on PATH)
#   LISTEN      control port address (default 0.0.0.0:48148)
#   ADMIN       admin port address (default 127.0.0.1:48152; keep it private)
#   TOKEN_FILE  bearer token file (default ./pccl-admin.token)
set -euo pipefail
PCCL=${PCCL:-pccl}
LISTEN=${LISTEN:-0.0.0.0:48148}
ADMIN=${ADMIN:-127.0.0.1:48152}
TOKEN_FILE=${TOKEN_FILE:-./pccl-admin.token}
if [ ! -s "$TOKEN_FILE" ]; then
    (umask 077; od -An -tx1 -N16 /dev/urandom | tr -d ' \n' > "$TOKEN_FILE")
    echo "master.sh: wrote a new admin token to $TOKEN_FILE" >&2
fi
# exec: signals from the supervisor (systemd, Ctrl-C) reach the master directly.
exec "$PCCL" master --listen "$LISTEN" --admin "$ADMIN" --admin-token-file "$TOKEN_FILE" "$@"
