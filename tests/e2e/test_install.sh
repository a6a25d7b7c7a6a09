#!/usr/bin/env bash
# test_install.sh BIN_DIR - `cmake --install` into a temp prefix, then builds a
# consumer program out of tree against the installed package two ways
# (find_package(pccl) with the shared and the static target, and pkg-config
# with and without --static) and runs each. Also checks the SONAME, the binary, man pages
# and completions landed where distributions look for them, and that the
# Python package imports and loads the installed library.
set -euo pipefail
BIN=${1:?usage: $0 BIN_DIR}
BUILD=$(cd "$BIN/.." && pwd)
WORK=$(mktemp -d /tmp/pccl-install.XXXXXX)
trap 'rm -rf "$WORK"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

PREFIX=$WORK/prefix
cmake --install "$BUILD" --prefix "$PREFIX" > "$WORK/install.log" || { cat "$WORK/install.log"; fail "install"; }
LIBDIR=$(dirname "$(find "$PREFIX" -name libpccl.a | head -1)")
[ -f "$LIBDIR/libpccl.a" ] || fail "libpccl.a not installed"
# Whole outputs are read before matching: with pipefail, `tool | grep -q` fails when grep's early exit
# sends the tool SIGPIPE.
dynamic=$(objdump -p "$LIBDIR/libpccl.so") || fail "objdump -p libpccl.so"
grep -q 'SONAME *libpccl.so.0' <<< "$dynamic" || fail "libpccl.so has no SONAME libpccl.so.0"
for f in include/pccl.h include/pccl_ext.h include/pccl_leave.h include/pccl_compress.h include/ccoip_inet.h bin/pccl share/bash-completion/completions/pccl \
         share/zsh/site-functions/_pccl share/fish/vendor_completions.d/pccl.fish; do
    [ -e "$PREFIX/$f" ] || fail "$f not installed"
done
# The completions are the ones the binary generates from its flag tables.
cmp -s "$PREFIX/share/bash-completion/completions/pccl" <("$BIN/pccl" help --completions bash) ||
    fail "the installed bash completion is not what pccl help --completions bash prints"
if command -v scdoc > /dev/null; then
    for p in man1/pccl.1 man1/pccl-master.1 man1/pccl-status.1 man3/libpccl.3; do
        [ -f "$PREFIX/share/man/$p" ] || fail "man page $p not installed"
    done
    # with the OPTIONS generated from the flag table
    page=$(cat "$PREFIX/share/man/man1/pccl-master.1")
    grep -q 'vote-timeout' <<< "$page" || fail "pccl-master(1) lacks its generated OPTIONS"
fi
"$PREFIX/bin/pccl" --version > /dev/null || fail "installed pccl does not run"
# Nothing of the build or source tree may leak into the package.
if grep -rqs -e "$BUILD" -e "$(cd "$BIN/../.." 2>/dev/null && pwd)/libpccl" "$LIBDIR/cmake" "$LIBDIR/pkgconfig"; then
    fail "build-tree paths leak into the installed package files"
fi

mkdir -p "$WORK/src"
cat > "$WORK/src/consumer.c" <<'C'
#include <pccl.h>
#include <pccl_leave.h>
#include <pccl_compress.h>
#include <stdio.h>
int main(void) {
    pcclBuildInfo_t info;
    if (pcclInit() != pcclSuccess || pcclGetBuildInfo(&info) != pcclSuccess) return 1;
    if (pcclExtLeave(NULL) != pcclInvalidArgument) return 1;
    pcclQuantizationOptions_t q = {.quantized_datatype = pcclExtUint4, .algorithm = pcclQuantMinMax};
    if ((int)q.quantized_datatype != 64) return 1;
    printf("cuda=%d invalid_usage=%s\n", info.has_cuda_support, pcclResultString(pcclInvalidUsage));
    return 0;
}
C
cat > "$WORK/src/CMakeLists.txt" <<'CM'
cmake_minimum_required(VERSION 3.18)
project(consumer C)
option(WANT_STATIC "link libpccl.a" OFF)
if(WANT_STATIC)
  find_package(pccl 0.1 REQUIRED COMPONENTS static)
  add_executable(consumer_static consumer.c)
  target_link_libraries(consumer_static PRIVATE pccl::pccl_static)
else()
  find_package(pccl 0.1 REQUIRED)
  add_executable(consumer_shared consumer.c)
  target_link_libraries(consumer_shared PRIVATE pccl::pccl)
endif()
CM
# The shared library's consumer finds pccl with neither the CUDA toolkit, pkg-config nor any dependency's .pc
# file (libmicrohttpd's) in reach, and its link line names libpccl alone.
PKG_CONFIG_LIBDIR=/nonexistent cmake -S "$WORK/src" -B "$WORK/out" -DCMAKE_PREFIX_PATH="$PREFIX" \
    -DCMAKE_DISABLE_FIND_PACKAGE_CUDAToolkit=ON -DCMAKE_DISABLE_FIND_PACKAGE_PkgConfig=ON \
    > "$WORK/cmake.log" 2>&1 || { cat "$WORK/cmake.log"; fail "find_package(pccl) needs more than the install"; }
cmake --build "$WORK/out" > "$WORK/build.log" 2>&1 || { cat "$WORK/build.log"; fail "consumer build (CMake)"; }
grep -E 'microhttpd|cudart|libuv|cjson|gomp' "$WORK/out/CMakeFiles/consumer_shared.dir/link.txt" \
    && fail "pccl::pccl passes its private dependencies to the consumer's link"
cmake -S "$WORK/src" -B "$WORK/out_static" -DCMAKE_PREFIX_PATH="$PREFIX" -DWANT_STATIC=ON > "$WORK/cmake.log" 2>&1 \
    || { cat "$WORK/cmake.log"; fail "find_package(pccl COMPONENTS static)"; }
cmake --build "$WORK/out_static" > "$WORK/build.log" 2>&1 || { cat "$WORK/build.log"; fail "consumer build (CMake, static)"; }
expect="invalid_usage=invalid usage (wrong state, mismatched parameters or revision)"
out=$(LD_LIBRARY_PATH="$LIBDIR" "$WORK/out/consumer_shared") || fail "consumer_shared failed"
[[ "$out" == *"$expect" ]] || fail "consumer_shared printed '$out'"
out=$("$WORK/out_static/consumer_static") || fail "consumer_static failed"
[[ "$out" == *"$expect" ]] || fail "consumer_static printed '$out'"
deps=$(ldd "$WORK/out_static/consumer_static") || fail "ldd consumer_static"
grep -q libpccl <<< "$deps" && fail "consumer_static links libpccl.so"

# pkg-config sees only the install: pccl.pc must not need any dependency's .pc file.
export PKG_CONFIG_LIBDIR="$LIBDIR/pkgconfig"
cc -o "$WORK/pc_shared" "$WORK/src/consumer.c" $(pkg-config --cflags --libs pccl) || fail "pkg-config build"
out=$(LD_LIBRARY_PATH="$LIBDIR" "$WORK/pc_shared") || fail "pkg-config consumer failed"
[[ "$out" == *"$expect" ]] || fail "pkg-config consumer printed '$out'"
# A static consumer: libpccl.a (-l:libpccl.a, so the linker cannot pick the .so) with --static's flags for the
# rest, which Debian ships as shared libraries.
static=$(pkg-config --static --libs pccl) || fail "pkg-config --static --libs pccl"
cc -o "$WORK/pc_static" "$WORK/src/consumer.c" $(pkg-config --cflags pccl) ${static/-lpccl/-l:libpccl.a} \
    || fail "pkg-config --static link of libpccl.a ($static)"
out=$("$WORK/pc_static") || fail "pkg-config static consumer failed"
[[ "$out" == *"$expect" ]] || fail "pkg-config static consumer printed '$out'"
deps=$(ldd "$WORK/pc_static") || fail "ldd pc_static"
grep -q libpccl <<< "$deps" && fail "pkg-config static consumer links libpccl.so"
unset PKG_CONFIG_LIBDIR

# The Python package: in PREFIX/lib/python3.X/dist-packages (on python3's path for /usr and /usr/local), loading
# the installed library through the libdir recorded at install time, with no environment variable.
if [ -x /usr/bin/python3 ]; then
    PYPKG=$(dirname "$(find "$PREFIX" -path '*/pccl/_install_libdir.py' | head -1)")
    [[ "$PYPKG" == "$PREFIX"/lib/python3.*/*-packages/pccl ]] || fail "Python package not installed ('$PYPKG')"
    py=$(cd "$WORK" && env -u PCCL_LIBRARY -u LD_LIBRARY_PATH -u PYTHONPATH /usr/bin/python3 -c "
import sys; sys.path.insert(0, '$(dirname "$PYPKG")')
import pccl
m = pccl.MasterNode('127.0.0.1:0'); m.run(); m.interrupt(); m.await_termination()
print(pccl.__file__, pccl.library_path)") || fail "installed Python package does not import"
    [[ "$py" == "$PYPKG/__init__.py $LIBDIR/libpccl.so.0" ]] || fail "installed Python package loaded '$py'"
fi
echo "install ok: $out"
