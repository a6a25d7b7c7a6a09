#!/bin/sh
# build_wheel.sh - a wheel of the Python package (python/) with libpccl inside it, built offline from the tree with
# Debian's python3, pip, setuptools and wheel (no network, no build isolation).
#
# usage: scripts/build_wheel.sh [LIBPCCL [OUT_DIR]]
#   LIBPCCL  the library to bundle (default build/lib/libpccl.so)
#   OUT_DIR  where the .whl goes (default dist/)
# The installed package loads the bundled library with no environment variable (python/README.md lists what it
# still needs from the system).
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
lib=$(readlink -f "${1:-$root/build/lib/libpccl.so}")
out=${2:-$root/dist}
[ -f "$lib" ] || { echo "build_wheel.sh: no library at ${1:-$root/build/lib/libpccl.so} (build it first)" >&2; exit 2; }
python=${PYTHON:-/usr/bin/python3}
src=$(mktemp -d)
trap 'rm -rf "$src"' EXIT
# A copy: pip builds in the source directory, which must stay clean.
(cd "$root/python" && tar --exclude=tests --exclude=build --exclude='*.egg-info' --exclude=__pycache__ \
    --exclude=.pytest_cache --exclude=_install_libdir.py --exclude='libpccl.so*' -cf - .) | (cd "$src" && tar -xf -)
mkdir -p "$out"
PCCL_BUNDLE_LIBRARY=$lib "$python" -m pip wheel --quiet --no-build-isolation --no-deps --no-index \
    --wheel-dir "$out" "$src"
ls "$out"/pccl-*.whl
