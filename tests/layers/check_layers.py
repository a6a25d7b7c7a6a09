#!/usr/bin/env python3
"""check_layers.py - derives the include graph of libpccl/src/*/ and master/*/ folders and fails on what
breaks their layering (docs/architecture.md, "Layers"):

  - a cycle between folders (the layers point one way);
  - a cross-folder include that is not the other folder's own header (<folder>/<folder>.h, or the one
    named in FOLDER_HEADER), which is where each folder says what it owns;
  - a library folder that includes a master folder, or a master folder that includes a library folder
    other than base/ and sec/ (what the master shares with the peers lives below both);
  - a file of cli/ that includes a library or master header beyond CLI_ALLOWED (the command uses the public
    headers, libpccl/include/*.h with pccl_tools.h for its tools, and the master's one header);
  - a cycle between files inside one folder, unless the folder's header names it on a line
    "Cycle: a <-> b" saying why.

Usage: check_layers.py [REPO_ROOT]. Prints the graph, then each violation; exit status 1 when any.
"""
import os
import re
import sys

FOLDER_HEADER = {'ring': 'ring.h', 'comm': 'comm.h', 'p2p': 'p2p.h', 'admin': 'admin.h'}
SHARED_WITH_MASTER = {'base', 'sec'}
# The pccl command: the public headers (logging, addresses, keys, identities and the bandwidth probe come from
# pccl_tools.h), the master's one header (pccl master, solve-topology) and the relay's (pccl relay).
CLI_ALLOWED = {'server/server.h', 'relay/relay.h'}
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def folders(root):
    out = {}
    for top, kind in (('libpccl/src', 'lib'), ('master', 'master')):
        base = os.path.join(root, top)
        for name in sorted(os.listdir(base)):
            path = os.path.join(base, name)
            if os.path.isdir(path) and any(f.endswith(('.c', '.h')) for f in os.listdir(path)):
                out[name] = (kind, path)
    return out


def includes(path):
    with open(path, encoding='utf-8') as f:
        return INCLUDE.findall(f.read())


def find_cycle(graph):
    """A cycle as a list of nodes, or None (depth-first search, colours)."""
    colour, stack = {}, []

    def visit(n):
        colour[n] = 1
        stack.append(n)
        for m in sorted(graph.get(n, ())):
            if colour.get(m) == 1:
                return stack[stack.index(m):] + [m]
            if not colour.get(m):
                c = visit(m)
                if c:
                    return c
        stack.pop()
        colour[n] = 2
        return None

    for n in sorted(graph):
        if not colour.get(n):
            c = visit(n)
            if c:
                return c
    return None


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), '..', '..')
    fs = folders(root)
    bad, graph = [], {name: set() for name in fs}
    for name, (kind, path) in fs.items():
        header = FOLDER_HEADER.get(name, name + '.h')
        if not os.path.exists(os.path.join(path, header)):
            bad.append(f'{name}/: no folder header {name}/{header}')
        files = sorted(f for f in os.listdir(path) if f.endswith(('.c', '.h')))
        local = {}
        for f in files:
            for inc in includes(os.path.join(path, f)):
                if '/' not in inc:
                    continue
                other, hname = inc.split('/', 1)
                if other == name:
                    mod = os.path.splitext(f)[0]
                    dep = os.path.splitext(hname)[0]
                    if dep != mod:
                        local.setdefault(mod, set()).add(dep)
                    continue
                if other not in fs:
                    continue
                graph[name].add(other)
                if hname != FOLDER_HEADER.get(other, other + '.h'):
                    bad.append(f'{name}/{f} includes {inc}: another folder is reached through its header '
                               f'{other}/{FOLDER_HEADER.get(other, other + ".h")}')
                okind = fs[other][0]
                if kind == 'lib' and okind == 'master':
                    bad.append(f'{name}/{f} includes {inc}: the library never includes the master')
                if kind == 'master' and okind == 'lib' and other not in SHARED_WITH_MASTER:
                    bad.append(f'{name}/{f} includes {inc}: the master shares only '
                               f'{", ".join(sorted(SHARED_WITH_MASTER))} with the peers')
        cyc = find_cycle(local)
        if cyc:
            note = f'Cycle: {cyc[0]} <-> {cyc[1]}'
            with open(os.path.join(path, header), encoding='utf-8') as h:
                if note not in h.read():
                    bad.append(f'{name}/: files include each other in a cycle {" -> ".join(cyc)} '
                               f'and {name}/{header} does not say why ("{note}")')
    cli = os.path.join(root, 'cli')
    for top, _, names in os.walk(cli):
        for f in sorted(names):
            if not f.endswith(('.c', '.h')):
                continue
            for inc in includes(os.path.join(top, f)):
                if '/' in inc and inc.split('/', 1)[0] in fs and inc not in CLI_ALLOWED:
                    bad.append(f'cli: {os.path.relpath(os.path.join(top, f), root)} includes {inc}, not one '
                               f'of the headers the command may use ({", ".join(sorted(CLI_ALLOWED))})')
    for name in sorted(graph):
        print(f'{name:>9} ({fs[name][0]}) -> {" ".join(sorted(graph[name])) or "-"}')
    cyc = find_cycle(graph)
    if cyc:
        bad.append('folders include each other in a cycle: ' + ' -> '.join(cyc))
    for b in bad:
        print('layer violation:', b)
    return 1 if bad else 0


if __name__ == '__main__':
    sys.exit(main())
