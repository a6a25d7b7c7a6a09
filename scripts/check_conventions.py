#!/usr/bin/env python3
"""check_conventions.py - lists what breaks the one internal error convention (libpccl/src/base/err.h): an
internal function returns 0 or -PERR_<NAME> (a count or size >= 0 with the same codes), never a private
result enum or a bare negative number.

Reported, as PATH:LINE: KIND: TEXT
  - result-enum:  an enum with a member X_OK = 0 or a member set to a negative number (a private result
                  enum; states that are not results start at 0 and stay non-negative);
  - magic-return: `return -N;` with N >= 2 (with --strict also `return -1;`, which libc-like functions
                  documented as such, and comparators, still use);
  - magic-compare: a comparison with a bare -N, N >= 2 (`rc == -2`);
  - minus-one-compare: the result of a function defined in the scanned tree compared with -1
                  (`foo(...) == -1`, `!= -1`);
  - internal-result: a function of libpccl/src returning pcclResult_t that is not an API entry point (a name
                  declared PCCL_EXPORT in libpccl/include/*.h): pcclResult_t is made once, at the entry point,
                  by perr_result or a mapping function named *_result (comm_call_result, sync_result), so an
                  internal function returns 0 or -PERR_<NAME> instead. Folders in EDGE_PENDING are not checked
                  yet.
  - raw-timedwait: pthread_cond_timedwait outside libpccl/src/base/wait.c: a deadline goes through
                  pwait_cond_sleep (base/wait.h), whose clock is the condition variable's (pwait_cond_init:
                  net_now_ms's monotonic clock); an abstime on another clock never ends the wait on time.

Usage: check_conventions.py [--strict] [ROOT [PATH...]]. ROOT defaults to the repository this script is in;
PATHs (relative to ROOT) default to libpccl/src and master. Exit status 1 when anything is reported.
"""
import os
import re
import sys

DEFAULT_PATHS = ('libpccl/src', 'master')
RAW_TIMEDWAIT = re.compile(r'\bpthread_cond_timedwait\s*\(')
# Enums that look like results but are not a function's: what they are, and where that is written.
NOT_RESULTS = {
    'SS_OK': "the shared-state status byte of the wire protocol (docs/protocol.md), not a function's result",
}
# Folders of libpccl/src whose internals still return pcclResult_t (none: every folder is converted).
EDGE_PENDING = ()
# Internal functions that return pcclResult_t without being a *_result mapping: why.
EDGE_EXCEPTIONS = {
    'comm_check_ready': "every entry point's precondition check (initialized, connected, not left): "
                        "its answer is the entry point's result",
    'op_multiple_with_retry': "the body of both with-retry entry points (pcclAllReduceMultipleWithRetry, "
                              "pcclExtCollectiveMultipleWithRetry): it retries exactly the operations whose "
                              "callers would get pcclRankConnectionLost, so it works in the entry points' results",
}
EXPORTED = re.compile(r'\bPCCL_EXPORT\s+pcclResult_t\s+(\w+)\s*\(')
RESULT_FUNCTION = re.compile(r'^[ \t]*(?:static\s+)?(?:inline\s+)?pcclResult_t\s+(\w+)\s*\(', re.M)
ENUM = re.compile(r'\benum\b[^{;()]*\{([^}]*)\}', re.S)
OK_ZERO = re.compile(r'\b[A-Z][A-Z0-9_]*_OK\s*=\s*0\b')
NEG_MEMBER = re.compile(r'\b[A-Z][A-Z0-9_]*\s*=\s*-\s*\d')
MAGIC_RETURN = re.compile(r'\breturn\s+-\s*([2-9]|[1-9]\d+)\s*;')
MINUS_ONE_RETURN = re.compile(r'\breturn\s+-\s*1\s*;')
MAGIC_COMPARE = re.compile(r'[=!]=\s*-\s*([2-9]|[1-9]\d+)\b(?!\s*[.\w])')
DEFINITION = re.compile(r'^[A-Za-z_][\w \t\*]*?\b([a-z_][a-z0-9_]*)\s*\([^;{]*\)\s*\{', re.M)
CALL_MINUS_ONE = re.compile(r'\b([a-z_][a-z0-9_]*)\s*\(')


def strip_comments(text):
    """Comments and string literals blanked (newlines kept, so line numbers stay)."""
    def blank(m):
        return re.sub(r'[^\n]', ' ', m.group(0))
    return re.sub(r'/\*.*?\*/|//[^\n]*|"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\'', blank, text, flags=re.S)


def sources(root, paths):
    for p in paths:
        top = os.path.join(root, p)
        if os.path.isfile(top):
            yield top
            continue
        for d, _, files in os.walk(top):
            for f in sorted(files):
                if f.endswith(('.c', '.h')):
                    yield os.path.join(d, f)


def line_of(text, pos):
    return text.count('\n', 0, pos) + 1


def call_compared_minus_one(code, defined):
    """(position, function) of each `f(...) == -1` / `!= -1` where f is defined in the tree."""
    out = []
    for m in re.finditer(r'[=!]=\s*-\s*1\b(?!\s*[.\w])', code):
        # Walk back over the left operand: it must end with ')' closing a call of a defined function.
        i = m.start() - 1
        while i >= 0 and code[i] in ' \t\n':
            i -= 1
        if i < 0 or code[i] != ')':
            continue
        depth = 0
        while i >= 0:
            if code[i] == ')':
                depth += 1
            elif code[i] == '(':
                depth -= 1
                if depth == 0:
                    break
            i -= 1
        j = i - 1
        while j >= 0 and code[j] in ' \t':
            j -= 1
        k = j
        while k >= 0 and (code[k].isalnum() or code[k] == '_'):
            k -= 1
        name = code[k + 1:j + 1]
        if name in defined:
            out.append((m.start(), name))
    return out


def exported_names(root):
    """Names declared PCCL_EXPORT pcclResult_t in libpccl/include/*.h: the API entry points."""
    names = set()
    inc = os.path.join(root, 'libpccl', 'include')
    if os.path.isdir(inc):
        for f in sorted(os.listdir(inc)):
            if f.endswith('.h'):
                with open(os.path.join(inc, f), encoding='utf-8', errors='replace') as fh:
                    names.update(EXPORTED.findall(strip_comments(fh.read())))
    return names


def internal_results(code, rel, exported):
    """(position, name) of each function in libpccl/src (outside EDGE_PENDING) returning pcclResult_t that is
    neither an entry point, nor a *_result mapping, nor in EDGE_EXCEPTIONS."""
    path = rel.replace(os.sep, '/')
    if not path.startswith('libpccl/src/') or path.startswith(EDGE_PENDING):
        return []
    return [(m.start(1), m.group(1)) for m in RESULT_FUNCTION.finditer(code)
            if m.group(1) not in exported and not m.group(1).endswith('_result') and
            m.group(1) not in EDGE_EXCEPTIONS]


def main(argv):
    strict = '--strict' in argv
    args = [a for a in argv if a != '--strict']
    root = args[0] if args else os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    paths = args[1:] or DEFAULT_PATHS
    files = list(sources(root, paths))
    code_of = {}
    defined = set()
    for f in files:
        with open(f, encoding='utf-8', errors='replace') as fh:
            code_of[f] = strip_comments(fh.read())
        if f.endswith('.c'):
            defined.update(DEFINITION.findall(code_of[f]))
    exported = exported_names(root)
    found = []
    for f in files:
        code, rel = code_of[f], os.path.relpath(f, root)
        lines = code.split('\n')

        def report(pos, kind, text=None):
            n = line_of(code, pos)
            found.append('%s:%d: %s: %s' % (rel, n, kind, text or lines[n - 1].strip()))

        for m in ENUM.finditer(code):
            body = m.group(1)
            if any(re.search(r'\b%s\b' % name, body) for name in NOT_RESULTS):
                continue
            if OK_ZERO.search(body) or NEG_MEMBER.search(body):
                report(m.start(), 'result-enum', ' '.join(m.group(0).split())[:120])
        for m in MAGIC_RETURN.finditer(code):
            report(m.start(), 'magic-return')
        if strict:
            for m in MINUS_ONE_RETURN.finditer(code):
                report(m.start(), 'minus-one-return')
        for m in MAGIC_COMPARE.finditer(code):
            report(m.start(), 'magic-compare')
        for pos, name in call_compared_minus_one(code, defined):
            report(pos, 'minus-one-compare', '%s() compared with -1' % name)
        if not rel.replace(os.sep, '/').endswith('libpccl/src/base/wait.c'):
            for m in RAW_TIMEDWAIT.finditer(code):
                report(m.start(), 'raw-timedwait', 'pthread_cond_timedwait: use pwait_cond_sleep (base/wait.h)')
        for pos, name in internal_results(code, rel, exported):
            report(pos, 'internal-result', '%s returns pcclResult_t: return 0 or -PERR_<NAME> and map it at '
                   'the entry point' % name)
    def order(line):
        path, n = line.split(':', 2)[:2]
        return path, int(n)
    for line in sorted(found, key=order):
        print(line)
    print('%d finding(s) in %d files' % (len(found), len(files)), file=sys.stderr)
    return 1 if found else 0


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
