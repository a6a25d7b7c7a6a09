#!/usr/bin/env bash
# test.sh - installs what the tests need, builds pccl and runs every test:
# unit and end-to-end tests (ctest), the CLI tests (bats) and the Python package's tests (pytest).
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/deps.sh
./scripts/build.sh build
status=0
ctest --test-dir build --output-on-failure -j2 || status=1
PCCL_BIN="$PWD/build/bin/pccl" bats tests/cli || status=1
# Debian's python3 (a pyenv shim may come first on PATH); the outer timeout bounds a hang in C.
PCCL_LIBRARY="$PWD/build/lib/libpccl.so" timeout 900 /usr/bin/python3 -m pytest -p no:cacheprovider -q -rs python/tests \
    || status=1
exit $status
