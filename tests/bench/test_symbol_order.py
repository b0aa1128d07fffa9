"""symbol_order.py against small text profiles written as llvm-profdata
writes them (`merge --text`), one per process of a training run."""

import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).with_name("symbol_order.py")
sys.path.insert(0, str(SCRIPT.parent))

import symbol_order  # noqa: E402


def record(name, counters, value_sites=False):
    """One function's record, as `llvm-profdata merge --text` writes it."""
    lines = [name, "# Func Hash:", "1234", "# Num Counters:", str(len(counters))]
    lines += ["# Counter Values:"] + [str(c) for c in counters]
    if value_sites:
        # Value profiling data follows some records; it is not a record.
        lines += ["# Num Value Kinds:", "1", "# ValueKind = IPVK_MemOPSize:", "1",
                  "# NumValueSites:", "1", "1", "8:5"]
    return "\n".join(lines) + "\n\n"


def profile(tmp_path, name, records):
    path = tmp_path / name
    path.write_text("# IR level Instrumentation Flag\n:ir\n" + "".join(records))
    return path


SERVER = "_ZN7gateway6server5start28_$u7b$$u7b$closure$u7d$$u7d$17h0123456789abcdefE"


def run(*args):
    return subprocess.run(
        [sys.executable, str(SCRIPT), *map(str, args)],
        capture_output=True, text=True, check=False,
    )


def test_start_up_first_then_the_load_hottest_first(tmp_path):
    # The start-up run: a server that only started, and an admin command.
    startup = profile(tmp_path, "startup-1.txt", [
        record("_ZN6config17h1E", [1, 0]),
        record("gateway.abc-cgu.0;_ZN5alloc17h2E", [40, 3], value_sites=True),
        record(SERVER, [1]),
        record("_ZN5never17h3E", [0, 0, 0]),
    ])
    admin = profile(tmp_path, "startup-2.txt", [
        record("_ZN3cli17h9E", [7]),
        record(SERVER, [0]),
    ])
    load = profile(tmp_path, "load-1.txt", [
        record("_ZN6config17h1E", [1]),
        record("gateway.abc-cgu.0;_ZN5alloc17h2E", [90000]),
        record(SERVER, [1]),
        record("_ZN5never17h3E", [0]),
        record("_ZN5relay17h4E", [9000]),
        record("_ZN6stream17h5E", [9000]),
        record("_ZN4rare17h6E", [2]),
    ])
    # A compiler process: ran far more, none of it the server's.
    child = profile(tmp_path, "load-2.txt", [
        record("_ZN9cranelift7compile17h7E", [10**9]),
        record(SERVER, [0]),
    ])
    out = run("--startup", admin, startup, "--load", child, load)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split("\n") == [
        # Start-up's, by the load's counters: the object file's name is
        # not the symbol's.
        "_ZN5alloc17h2E",
        "_ZN6config17h1E",  # ties by name
        SERVER,
        # Then what only the load ran.
        "_ZN5relay17h4E",
        "_ZN6stream17h5E",
        "_ZN4rare17h6E",
        "",
    ]
    assert "3 functions ran in start-up" in out.stderr
    assert "3 more under load" in out.stderr and "load-1.txt" in out.stderr


def test_no_server_profile_or_two_are_refused(tmp_path):
    child = profile(tmp_path, "a.txt", [record("_ZN9cranelift17h6E", [3])])
    one = profile(tmp_path, "b.txt", [record(SERVER, [1])])
    two = profile(tmp_path, "c.txt", [record(SERVER, [2])])
    out = run("--startup", one, "--load", child)
    assert out.returncode != 0 and "0 of the profiles ran the server" in out.stderr
    out = run("--startup", one, two, "--load", one)
    assert out.returncode != 0 and "2 of the profiles ran the server" in out.stderr


@pytest.mark.parametrize("args", [[], ["--startup"], ["--load", "x"], ["--startup", "x", "--load"]])
def test_usage(args):
    out = run(*args)
    assert out.returncode != 0 and "usage:" in out.stderr


def test_both_manglings_of_the_server_mark():
    assert symbol_order.SERVER_MARK in SERVER
    assert symbol_order.SERVER_MARK in "_RNvNtCs1a2b_7gateway6server5start"


@pytest.mark.parametrize("name, symbol", [
    ("_ZN3foo17h1E", "_ZN3foo17h1E"),
    ("gateway.abc-cgu.0;_ZN3foo17h1E", "_ZN3foo17h1E"),
])
def test_symbol(name, symbol):
    assert symbol_order.symbol(name) == symbol
