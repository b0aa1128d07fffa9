#!/usr/bin/env python3
"""The gateway's functions in the order the linker should lay them out.

`make dist` (tests/bench/pgo.sh) calls this with the counters of every
process of the training run, one file each, as text (`llvm-profdata merge
--text`), and hands the output to lld as `--symbol-ordering-file`. Only the
server's counters count (the process that ran `gateway::server::start`, not
the compiler processes nor the admin commands): every function the server
ran comes first, hottest first, and the code it never ran (the compiler,
which runs in child processes, the CLI, paths the training does not take)
after it. The kernel maps a binary's code into a process a whole
page-cache folio (up to 128 KiB here) at a time, so code that runs scattered
over the whole binary keeps most of it resident; packed together, far less
of it is.

Usage: symbol_order.py PROFILE.txt... > order.txt
Prints which profile it used and how many functions it kept on stderr.
"""

import sys

# A function only the server process runs, as both of rustc's manglings
# write it (`_ZN7gateway6server5start...`, `_RNv...7gateway6server5start`).
SERVER_MARK = "7gateway6server5start"


def functions(lines):
    """(name, counters) of each function record of a text profile."""
    i = 0
    while i < len(lines):
        # A record: its name, "# Func Hash:", the hash, "# Num Counters:",
        # the count, "# Counter Values:", the values (then, for some, value
        # profiling data, which the scan skips like any other line).
        if i + 5 < len(lines) and lines[i + 1] == "# Func Hash:":
            n = int(lines[i + 4])
            values = [int(v) for v in lines[i + 6 : i + 6 + n]]
            yield lines[i], values
            i += 6 + n
        else:
            i += 1


def symbol(name):
    """The linker's name of a profile's function: a function local to its
    object file is recorded as `<object>;<symbol>`."""
    return name.rsplit(";", 1)[-1]


def executed(lines):
    """The hottest counter of each function that ran, by linker symbol."""
    ran = {}
    for name, values in functions(lines):
        hottest = max(values, default=0)
        if hottest > 0:
            sym = symbol(name)
            ran[sym] = max(ran.get(sym, 0), hottest)
    return ran


def order(ran):
    """Hottest (largest counter) first, then by name."""
    return sorted(ran, key=lambda s: (-ran[s], s))


def main():
    if len(sys.argv) < 2:
        sys.exit("usage: symbol_order.py PROFILE.txt... > order.txt")
    servers = []
    for path in sys.argv[1:]:
        with open(path, encoding="utf-8", errors="replace") as f:
            ran = executed(f.read().split("\n"))
        if any(SERVER_MARK in s for s in ran):
            servers.append((path, ran))
    if len(servers) != 1:
        sys.exit(
            f"symbol_order.py: {len(servers)} of the profiles ran the server "
            f"({SERVER_MARK}), not one"
        )
    path, ran = servers[0]
    sys.stdout.write("".join(s + "\n" for s in order(ran)))
    print(f"symbol_order.py: {len(ran)} functions ran in {path}", file=sys.stderr)


if __name__ == "__main__":
    main()
