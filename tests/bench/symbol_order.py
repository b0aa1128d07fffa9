#!/usr/bin/env python3
"""The gateway's functions in the order the linker should lay them out.

`make dist` (tests/bench/pgo.sh) calls this with the counters of two
training runs, one file per process, as text (`llvm-profdata merge
--text`): a gateway that only started (the bench's set-up, with no load)
and the bench's load. It hands the output to lld as
`--symbol-ordering-file`. Only the server's counters count (the process
that ran `gateway::server::start`, not the compiler processes nor the admin
commands). The functions come in the order they are first needed: those
start-up ran, then those only the load ran, each group hottest first (by
the load's counters), and the code the server never ran (the compiler,
which runs in child processes, the CLI, paths the training does not take)
after them. The kernel maps a binary's code into a process a whole
page-cache folio (up to 128 KiB here) at a time, so code that runs
scattered over the whole binary keeps most of it resident; packed
together, far less of it is, and an idle gateway maps only its start-up's.

Usage: symbol_order.py --startup PROFILE.txt... --load PROFILE.txt... > order.txt
Prints which profiles it used and how many functions it kept on stderr.
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


def order(startup, load):
    """Start-up's functions, then the load's others; hottest first in each
    (by the load's counters, then start-up's), then by name."""

    def hotness(sym):
        return (-load.get(sym, 0), -startup.get(sym, 0), sym)

    first = sorted(startup, key=hotness)
    then = sorted((s for s in load if s not in startup), key=hotness)
    return first + then


def server_profile(paths):
    """The path and executed functions of the one profile among `paths`
    that ran the server."""
    servers = []
    for path in paths:
        with open(path, encoding="utf-8", errors="replace") as f:
            ran = executed(f.read().split("\n"))
        if any(SERVER_MARK in s for s in ran):
            servers.append((path, ran))
    if len(servers) != 1:
        sys.exit(
            f"symbol_order.py: {len(servers)} of the profiles ran the server "
            f"({SERVER_MARK}), not one: {' '.join(paths)}"
        )
    return servers[0]


def main():
    args = sys.argv[1:]
    try:
        split = args.index("--load")
    except ValueError:
        split = -1
    if split < 2 or args[0] != "--startup" or split == len(args) - 1:
        sys.exit("usage: symbol_order.py --startup PROFILE.txt... --load PROFILE.txt... > order.txt")
    start_path, startup = server_profile(args[1:split])
    load_path, load = server_profile(args[split + 1 :])
    syms = order(startup, load)
    sys.stdout.write("".join(s + "\n" for s in syms))
    print(
        f"symbol_order.py: {len(startup)} functions ran in start-up ({start_path}), "
        f"{len(syms) - len(startup)} more under load ({load_path})",
        file=sys.stderr,
    )


if __name__ == "__main__":
    main()
