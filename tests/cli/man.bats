#!/usr/bin/env bats
# Man pages: one per subcommand of the binary, whose SYNOPSIS and OPTIONS the build generates from the command's
# flag table (`pccl help --synopsis CMD` and `pccl help --man CMD`, spliced into man/pccl-CMD.1.scd at its
# "; @SYNOPSIS@" and "; @OPTIONS@" lines; the SYNOPSIS is --help's usage line): each flag documented with
# the default and environment variable --help states; every result code of pccl.h in libpccl(3), every variable
# of README's configuration table in pccl(1), and scdoc renders all.
# PCCL_BIN points at the binary (default build/bin/pccl under the repo root); its build dir holds build/man.

setup() {
    REPO="$(cd "$BATS_TEST_DIRNAME/../.." && pwd)"
    PCCL=${PCCL_BIN:-$REPO/build/bin/pccl}
    BUILD="$(cd "$(dirname "$PCCL")/.." && pwd)"
}

# The source page $2 with its marker lines replaced by what `pccl help` generates for command $1.
generated_page() {
    while IFS= read -r line; do
        case "$line" in
        '; @SYNOPSIS@'*) "$PCCL" help --synopsis "$1" ;;
        '; @OPTIONS@'*) "$PCCL" help --man "$1" ;;
        *) printf '%s\n' "$line" ;;
        esac
    done < "$2"
}

@test "every subcommand has a man page whose generated OPTIONS document each of its flags" {
    for cmd in $("$PCCL" __complete); do
        [ "$cmd" = help ] && continue
        src="$REPO/man/pccl-$cmd.1.scd" page="$BUILD/man/pccl-$cmd.1.scd"
        [ -f "$src" ] || { echo "no man page for $cmd"; false; }
        grep -q "pccl-$cmd" "$REPO/man/pccl.1.scd" || { echo "pccl(1) does not mention $cmd"; false; }
        [ "$(grep -c '^; @OPTIONS@' "$src")" -eq 1 ] || { echo "$src: want one '; @OPTIONS@' line"; false; }
        [ "$(grep -c '^; @SYNOPSIS@' "$src")" -eq 1 ] || { echo "$src: want one '; @SYNOPSIS@' line"; false; }
        [ -f "$page" ] || { echo "the build has no $page"; false; }
        diff <(generated_page "$cmd" "$src") "$page"
        for f in $("$PCCL" __complete "$cmd"); do
            grep -qE -- "^(\*-h\*, )?\*$f\*" "$page" || { echo "$page lacks $f"; false; }
        done
    done
}

@test "a command's --help usage line and its man page SYNOPSIS are one synopsis, naming only its flags" {
    n=0
    for cmd in $("$PCCL" __complete); do
        [ "$cmd" = help ] && continue
        # the SYNOPSIS without scdoc's markup, its forms joined by " | " and its wrapped lines by a space
        syn=$("$PCCL" help --synopsis "$cmd" | sed 's/^\\\[/[/; s/[*_]//g' | paste -sd' ' |
            sed "s/  pccl $cmd / | /g; s/^pccl $cmd //")
        usage=$("$PCCL" "$cmd" --help | head -1 | sed "s/^usage: pccl $cmd //")
        [ "$syn" = "$usage" ] || { echo "$cmd: man SYNOPSIS '$syn' but --help '$usage'"; false; }
        for f in $(grep -o -- '--[a-z0-9-]*' <<< "$usage"); do
            grep -q -- "^  $f\b" <<< "$("$PCCL" "$cmd" --help)" || { echo "$cmd: usage names $f, no option of it"; false; }
        done
        n=$((n + 1))
    done
    [ "$n" -ge 9 ]
    # a form of its own per alternative at the top level, each on its own line of the page
    [ "$("$PCCL" help --synopsis bench-bandwidth | grep -c '^\*pccl bench-bandwidth\*')" -eq 3 ]
    [[ "$("$PCCL" status --help | head -1)" == *"[--watch [SECONDS]]"* ]]
}

@test "a flag's range, default and environment variable read the same in --help and in the man page" {
    n=0 r=0
    for cmd in $("$PCCL" __complete); do
        [ "$cmd" = help ] && continue
        man=$("$PCCL" help --man "$cmd")
        while read -r flag rest; do
            entry=$(awk -v f="*$flag*" 'index($0, f) == 1 {on = 1; next} /^\*/ {on = 0} on' <<< "$man")
            if [[ "$rest" =~ \(default\ ([^\;\)]*) ]]; then
                grep -qF "Default: ${BASH_REMATCH[1]}." <<< "$entry" || { echo "$cmd $flag: man lacks default ${BASH_REMATCH[1]}"; false; }
                n=$((n + 1))
            fi
            if [[ "$rest" =~ \(([0-9]+)\ to\ ([0-9]+)[\;\)] ]]; then
                lo=${BASH_REMATCH[1]} hi=${BASH_REMATCH[2]}
                grep -qF "Values: $lo to $hi." <<< "$entry" || { echo "$cmd $flag: man lacks $lo to $hi"; false; }
                # and the parser holds the flag to them
                for bad in $((hi + 1)) $((lo - 1)); do
                    [ "$bad" -ge 0 ] || continue
                    run "$PCCL" "$cmd" "$flag" "$bad"
                    [ "$status" -eq 2 ] && [[ "$output" == *"$flag"*"$bad"* || "$output" == *"$bad"*"$flag"* || "$output" == *"$flag must be $lo..$hi"* ]] ||
                        { echo "$cmd $flag $bad: $status $output"; false; }
                done
                r=$((r + 1))
            fi
            if [[ "$rest" =~ env\ (PCCL_[A-Z_]*)\) ]]; then
                grep -qF "Environment: *${BASH_REMATCH[1]}*." <<< "$entry" || { echo "$cmd $flag: man lacks ${BASH_REMATCH[1]}"; false; }
            fi
        done < <("$PCCL" "$cmd" --help | grep -o -- '^  --[a-z0-9-]* .*')
    done
    [ "$n" -ge 25 ]
    [ "$r" -ge 15 ]
    # the master's vote timeout is the state machine's default (master/sm/master_sm.h), stated by both
    want=$(sed -n 's/^#define MSM_VOTE_TIMEOUT_MS \([0-9]*\)$/\1/p' "$REPO/master/sm/master_sm.h")
    [ -n "$want" ]
    [[ "$("$PCCL" master --help)" == *"--vote-timeout MS"*"; default $want;"* ]]
    grep -qF "Default: $want. Environment: *PCCL_VOTE_TIMEOUT_MS*." "$BUILD/man/pccl-master.1.scd"
}

@test "pccl help --man and --completions refuse what they do not know (exit 2)" {
    run "$PCCL" help --man nope
    [ "$status" -eq 2 ]
    [[ "$output" == *"unknown command 'nope'"* ]]
    run "$PCCL" help --synopsis nope
    [ "$status" -eq 2 ]
    run "$PCCL" help --man
    [ "$status" -eq 2 ]
}

@test "libpccl(3) lists every result code" {
    codes=$(grep -o 'X(pccl[A-Za-z]*' "$REPO/libpccl/include/pccl.h" | sed 's/X(//')
    [ -n "$codes" ]
    for c in $codes; do grep -q "\*$c\*" "$REPO/man/libpccl.3.scd" || { echo "missing $c"; false; }; done
}

@test "scdoc renders every page, the generated ones included" {
    command -v scdoc > /dev/null || skip "scdoc not installed"
    for f in "$REPO"/man/*.scd "$BUILD"/man/*.scd; do scdoc < "$f" > /dev/null || { echo "scdoc fails on $f"; false; }; done
}

@test "pccl(1) ENVIRONMENT documents every variable of README's configuration table" {
    vars=$(sed -n '/^## Configuration/,/^## /p' "$REPO/README.md" | grep -o '^| `PCCL_[A-Z0-9_]*`' | tr -d '|` ')
    [ "$(wc -w <<< "$vars")" -ge 15 ]
    env=$(sed -n '/^# ENVIRONMENT/,/^# SHELL COMPLETION/p' "$REPO/man/pccl.1.scd")
    for v in $vars; do grep -q "\*$v\*" <<< "$env" || { echo "pccl(1) ENVIRONMENT lacks $v"; false; }; done
}
