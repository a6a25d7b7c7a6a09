#!/usr/bin/env bash
# test.sh - installs what the tests need, builds pccl and runs every test:
# unit and end-to-end tests (ctest) and the CLI tests (bats).
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/deps.sh
./scripts/build.sh build
status=0
ctest --test-dir build --output-on-failure -j2 || status=1
PCCL_BIN="$PWD/build/bin/pccl" bats tests/cli || status=1
exit $status
