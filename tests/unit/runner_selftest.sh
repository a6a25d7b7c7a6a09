#!/usr/bin/env bash
# runner_selftest.sh BIN [SANITIZE] - checks tinytest.h's runner on runner_selftest.c's cases: a hanging and
# a crashing test fail alone, named, and the rest pass; a failed check fails its test; a main() that started
# a thread runs no test; a test runs by name in process; the exit status says whether any test failed.
# SANITIZE is the build's PCCL_SANITIZE (a sanitizer reports a crash itself, so only a plain build must show
# the signal).
set -u
BIN=${1:?usage: $0 BIN [SANITIZE]}
SAN=${2:-}
fails=0
out=$(mktemp /tmp/pccl-runner-selftest.XXXXXX)
trap 'rm -f "$out"' EXIT

expect() { # expect WHAT PATTERN: the last run's output has a line matching PATTERN (extended regex)
    if ! grep -Eq -- "$2" "$out"; then
        echo "FAIL: $1: no line matches '$2'"; fails=1
    fi
}
expect_not() {
    if grep -Eq -- "$2" "$out"; then
        echo "FAIL: $1: a line matches '$2'"; fails=1
    fi
}
expect_rc() { # expect_rc WHAT WANT GOT
    if [ "$3" != "$2" ]; then echo "FAIL: $1: exit status $3, not $2"; fails=1; fi
}
run() { # run ARGS...: the output to $out, the exit status to $rc
    "$@" > "$out" 2>&1
    rc=$?
    sed 's/^/    /' "$out"
}

echo "== every test, each in its own process"
run "$BIN"
expect_rc "a file with failed tests" 1 "$rc"
expect "a pass is named with its time" '^ok   passes_first \([0-9]+\.[0-9]{3} s\)$'
expect "a hang is killed at its deadline" '^FAIL hangs \([0-9.]+ s\): hung past its [0-9]+ s deadline, killed$'
if [ -z "$SAN" ]; then
    expect "a crash names its signal" '^FAIL crashes \([0-9.]+ s\): killed by signal 11 '
else
    expect "a crash fails its test" '^FAIL crashes \([0-9.]+ s\): (killed by signal|exited with status)'
fi
expect "the tests after the failures run, from main()'s state" '^ok   passes_after_failures '
expect "the others pass" '^ok   fails_a_check '
expect "the summary names exactly the failed tests" '^5 tests, 2 failed: hangs crashes; [0-9]+ checks, 0 failed$'

echo "== a failed check fails its test; TT_TIMEOUT_S sets the deadline"
run env TT_SELFTEST_FAIL_CHECK=1 TT_TIMEOUT_S=1 "$BIN"
expect_rc "a file with failed tests" 1 "$rc"
expect "a failed check" '^FAIL fails_a_check \([0-9.]+ s\): 1 of 3 checks failed$'
expect "its file, line and condition" 'runner_selftest\.c:[0-9]+: CHECK failed'
expect "TT_TIMEOUT_S" '^FAIL hangs \([0-9.]+ s\): hung past its 1 s deadline, killed$'
expect "the summary" '^5 tests, 3 failed: hangs crashes fails_a_check; [0-9]+ checks, 1 failed$'

echo "== main() started a thread: no test runs in a fork of it"
run env TT_SELFTEST_THREAD=1 "$BIN"
expect_rc "a file whose main() started a thread" 1 "$rc"
expect "the tests are not run" '^FAIL passes_first \([0-9.]+ s\): not run: main\(\) has [0-9]+ threads'
expect "none of them" '^5 tests, 5 failed: passes_first hangs crashes passes_after_failures fails_a_check; 0 checks, 0 failed$'

echo "== one test by name, in this process"
run "$BIN" passes_after_failures
expect_rc "a passing test by name" 0 "$rc"
expect "it ran" '^ok   passes_after_failures '
expect "alone" '^1 tests, 0 failed; 4 checks, 0 failed$'
run env TT_TEST=passes_first "$BIN"
expect_rc "a passing test by TT_TEST" 0 "$rc"
expect "alone" '^1 tests, 0 failed; '
run "$BIN" crashes
[ "$rc" != 0 ] || { echo "FAIL: a crash in process: exit status 0"; fails=1; }
expect_not "in process, a crash takes the process (no runner to report it)" 'tests, '
run "$BIN" no_such_test
expect_rc "an unknown name" 2 "$rc"
expect "says so" '^no test named no_such_test'
run "$BIN" --list
expect_rc "--list" 0 "$rc"
[ "$(tr '\n' ' ' < "$out")" = "passes_first hangs crashes passes_after_failures fails_a_check " ] ||
    { echo "FAIL: --list names the tests in order"; fails=1; }

[ $fails = 0 ] && echo "runner self-test passed"
exit $fails
