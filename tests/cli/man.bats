#!/usr/bin/env bats
# Man pages: one per subcommand of the binary, each flag of its table
# documented, every result code of pccl.h in libpccl(3), every variable of README's configuration table in
# pccl(1), and scdoc renders all.

setup() {
    REPO="$(cd "$BATS_TEST_DIRNAME/../.." && pwd)"
    PCCL=${PCCL_BIN:-$REPO/build/bin/pccl}
}

@test "every subcommand has a man page that documents each of its flags" {
    for cmd in $("$PCCL" __complete); do
        [ "$cmd" = help ] && continue
        page="$REPO/man/pccl-$cmd.1.scd"
        [ -f "$page" ] || { echo "no man page for $cmd"; false; }
        grep -q "pccl-$cmd" "$REPO/man/pccl.1.scd" || { echo "pccl(1) does not mention $cmd"; false; }
        for f in $("$PCCL" __complete "$cmd"); do
            [ "$f" = --help ] && continue
            grep -q -- "\*$f\*" "$page" || { echo "$page lacks $f"; false; }
        done
    done
}

@test "libpccl(3) lists every result code" {
    codes=$(grep -o 'X(pccl[A-Za-z]*' "$REPO/libpccl/include/pccl.h" | sed 's/X(//')
    [ -n "$codes" ]
    for c in $codes; do grep -q "\*$c\*" "$REPO/man/libpccl.3.scd" || { echo "missing $c"; false; }; done
}

@test "scdoc renders every page" {
    command -v scdoc > /dev/null || skip "scdoc not installed"
    for f in "$REPO"/man/*.scd; do scdoc < "$f" > /dev/null || { echo "scdoc fails on $f"; false; }; done
}

@test "pccl(1) ENVIRONMENT documents every variable of README's configuration table" {
    vars=$(sed -n '/^## Configuration/,/^## /p' "$REPO/README.md" | grep -o '^| `PCCL_[A-Z0-9_]*`' | tr -d '|` ')
    [ "$(wc -w <<< "$vars")" -ge 15 ]
    env=$(sed -n '/^# ENVIRONMENT/,/^# SHELL COMPLETION/p' "$REPO/man/pccl.1.scd")
    for v in $vars; do grep -q "\*$v\*" <<< "$env" || { echo "pccl(1) ENVIRONMENT lacks $v"; false; }; done
}
