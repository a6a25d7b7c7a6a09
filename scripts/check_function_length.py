#!/usr/bin/env python3
"""check_function_length.py - no C function longer than a limit: a function does one thing.

Counts the lines of each top-level function definition in the C files under the given folders (default:
libpccl, master, cli), from the line of its name to the line of its closing brace, and prints each one over
the limit as FILE:LINE: NAME N lines. Exit 0 when there is none, 1 otherwise.

    scripts/check_function_length.py [--max N] [--all] [DIR...]

--all lists every function with its length (longest first) instead of checking.
"""
import argparse
import os
import re
import sys

DEFAULT_DIRS = ("libpccl", "master", "cli")
NAME = re.compile(r"([A-Za-z_]\w*)\s*\($")


def strip_code(text):
    """text with comments, string and character literals blanked (newlines kept), so braces count."""
    out, i, n = [], 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
        elif c in "\"'":
            j = i + 1
            while j < n and text[j] != c:
                j += 2 if text[j] == "\\" else 1
            out.append(c + re.sub(r"[^\n]", " ", text[i + 1:j]) + c)
            i = j + 1
        elif c == "#" and (i == 0 or text[i - 1] == "\n"):
            # a preprocessor line, with its continuations
            j = i
            while True:
                k = text.find("\n", j)
                if k < 0:
                    k = n
                    break
                if text[k - 1] != "\\":
                    break
                j = k + 1
            out.append(re.sub(r"[^\n]", " ", text[i:k]))
            i = k
        else:
            out.append(c)
            i += 1
    return "".join(out)


def functions(path):
    """(name, first line, length in lines) of each top-level function definition of a C file."""
    with open(path, encoding="utf-8", errors="replace") as f:
        code = strip_code(f.read())
    found, depth, head_start, i = [], 0, 0, 0
    open_at = None
    for i, c in enumerate(code):
        if c == "{":
            if depth == 0:
                head = code[head_start:i]
                flat = " ".join(head.split())
                paren = flat.find("(")
                is_func = (paren > 0 and flat.rstrip().endswith(")") or re.search(r"\)\s*(__attribute__.*)?$", flat)) \
                    and not re.match(r"(typedef|struct|union|enum)\b", flat) and "=" not in flat[:paren]
                m = NAME.search(flat[:paren + 1]) if paren > 0 else None
                open_at = (m.group(1), code.count("\n", 0, head_start + len(head) - len(head.lstrip()))) \
                    if is_func and m else None
            depth += 1
        elif c == "}":
            depth -= 1
            if depth == 0:
                if open_at:
                    name, first = open_at
                    last = code.count("\n", 0, i)
                    found.append((name, first + 1, last - first + 1))
                open_at = None
                head_start = i + 1
        elif c == ";" and depth == 0:
            head_start = i + 1
    return found


def c_files(dirs):
    for d in dirs:
        for root, _, names in os.walk(d):
            for name in sorted(names):
                if name.endswith(".c"):
                    yield os.path.join(root, name)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--max", type=int, default=120, help="longest function allowed, in lines (default 120)")
    ap.add_argument("--all", action="store_true", help="list every function with its length")
    ap.add_argument("dirs", nargs="*", default=None)
    args = ap.parse_args()
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    dirs = args.dirs or [os.path.join(root, d) for d in DEFAULT_DIRS]
    rows = []
    for path in c_files(dirs):
        rel = os.path.relpath(path, root)
        rows += [(n, rel, line, name) for name, line, n in functions(path)]
    rows.sort(reverse=True)
    if args.all:
        for n, rel, line, name in rows:
            print(f"{n:5d} {rel}:{line}: {name}")
        return 0
    over = [r for r in rows if r[0] > args.max]
    for n, rel, line, name in over:
        print(f"{rel}:{line}: {name} {n} lines (at most {args.max})")
    return 1 if over else 0


if __name__ == "__main__":
    sys.exit(main())
