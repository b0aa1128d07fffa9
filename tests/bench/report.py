#!/usr/bin/env python3
"""The arithmetic and the printed report of `make bench` (tests/bench/run.sh).

    report.py augment JSON CELL CONC CLK_TCK SERVER_INSTR MOCK_INSTR
        One loadgen JSON line with the script's facts added: the cell and
        concurrency, CPU µs (and per request, and per frame for streams) of
        the process under test ("server") and of the mock, instructions per
        request when perf counted them. Prints the new line.
    report.py machine COMMAND ROOT WORKERS GATEWAY [NGINX_VERSION]
        The machine, the command, the commit, the servers' worker count and
        the gateway binary measured, as one JSON line.
    report.py tag JSON KEY VALUE [KEY VALUE ...]
        The JSON object with those members added (strings; digits become
        numbers). Prints the new line.
    report.py print LATEST_JSONL
        The report: tables, ratios, memory, storage, streams, soak, and the
        comparison with issue 13's targets (informational); for the paired
        mode (BENCH_PAIR=1), both sides round by round and B's over A's.
"""

import datetime
import json
import os
import platform
import statistics
import subprocess
import sys

MIB = 1024  # KiB per MiB

# Issue 13, item 2 (measured on a 2-core machine by `make bench`).
CPU_PER_REQ_US = 55
CPU_VS_NGINX = 4.0
RPS_VS_NGINX = 0.35
ADDED_P50_US = 100
ADDED_P99_US = 400
RSS_IDLE_MIB = 16
RSS_LOADED_MIB = 32
BYTES_PER_CALL = 300
CPU_PER_FRAME_US = 35
ADDED_TTFT_US = 300
CROSS_VS_PASS = 1.5


def perf_count(path):
    """Instructions from a `perf stat -x,` file, or None."""
    try:
        with open(path) as f:
            for line in f:
                parts = line.split(",")
                if len(parts) > 2 and parts[2].startswith("instructions") and parts[0].isdigit():
                    return int(parts[0])
    except OSError:
        pass
    return None


def augment(line, cell, conc, hz, server_instr, mock_instr):
    r = json.loads(line)
    r["cell"] = cell
    r["conc"] = int(conc)
    hz = int(hz)
    n = r.get("requests") or 0
    frames = r.get("frames") or 0
    for who, ticks in r.get("cpu_ticks", {}).items():
        us = ticks * 1_000_000 / hz
        r[f"{who}_cpu_us"] = round(us)
        if n:
            r[f"{who}_cpu_us_per_req"] = round(us / n, 1)
        if frames:
            r[f"{who}_cpu_us_per_frame"] = round(us / frames, 2)
    for who, path in (("server", server_instr), ("mock", mock_instr)):
        c = perf_count(path)
        if c is not None and n:
            r[f"{who}_instr_per_req"] = round(c / n)
    return json.dumps(r)


def tag(line, *pairs):
    r = json.loads(line)
    for key, value in zip(pairs[::2], pairs[1::2]):
        r[key] = int(value) if value.isdigit() else value
    return json.dumps(r)


def machine(command, root, workers, gateway, nginx_version=""):
    model = "?"
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    model = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    try:
        usable = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        usable = os.cpu_count()
    distro = ""
    try:
        with open("/etc/os-release") as f:
            for line in f:
                if line.startswith("PRETTY_NAME="):
                    distro = line.split("=", 1)[1].strip().strip('"')
    except OSError:
        pass
    commit = ""
    try:
        commit = subprocess.run(["git", "-C", root, "rev-parse", "--short", "HEAD"],
                                capture_output=True, text=True, timeout=10).stdout.strip()
        dirty = subprocess.run(["git", "-C", root, "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, timeout=10).stdout.strip()
        if commit and dirty:
            commit += " (with uncommitted changes)"
    except (OSError, subprocess.SubprocessError):
        pass
    try:
        with open("/proc/loadavg") as f:
            loadavg = " ".join(f.read().split()[:3])
    except OSError:
        loadavg = ""
    return json.dumps({
        "label": "machine",
        "loadavg": loadavg,
        "cpu": model,
        "cores": os.cpu_count(),
        "usable_cores": usable,
        "kernel": platform.release(),
        "os": distro,
        "commit": commit,
        "nginx": nginx_version.replace("nginx version: ", ""),
        "command": command,
        "workers": workers,
        "gateway": gateway,
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
    })


# --- the printed report ---------------------------------------------------------

def num(x, digits=1):
    if x is None:
        return "-"
    if isinstance(x, float):
        return f"{x:,.{digits}f}"
    return f"{x:,}"


def ratio(a, b):
    if a is None or b in (None, 0):
        return None
    return a / b


def diff(a, b):
    if a is None or b is None:
        return None
    return a - b


def mib(kib):
    return None if kib is None else kib / MIB


SOAK_MIN_SAMPLES = 4
# The soak's samples are printed this far apart (all of them are judged).
SOAK_PRINT_EVERY_S = 10


def soak_verdict(samples, slack_kib=MIB, slack_frac=0.02):
    """(flat?, rise, error, low, high) for a soak's (seconds, KiB) memory
    samples, judged on their second half (growth in the first is warm-up):
    `rise` is how much a least-squares line through that half climbs across
    it, `error` two standard errors of that rise (what the samples' scatter
    about the line leaves uncertain), `low` and `high` the half's range.
    Growing when the rise is above both max(1 MiB, 2% of the half's mean)
    and its error: a leak shows as a level that keeps rising, whereas
    batches allocated and freed make a bounded swing from one sample to the
    next that a comparison of single samples takes for growth. None with
    fewer than SOAK_MIN_SAMPLES samples."""
    if len(samples) < SOAK_MIN_SAMPLES:
        return None
    second = samples[len(samples) // 2:]
    n = len(second)
    ts = [t for t, _ in second]
    ks = [k for _, k in second]
    t_mean, k_mean = sum(ts) / n, sum(ks) / n
    spread = sum((t - t_mean) ** 2 for t in ts)
    slope = sum((t - t_mean) * (k - k_mean) for t, k in second) / spread if spread else 0.0
    span = ts[-1] - ts[0]
    scatter = sum((k - k_mean - slope * (t - t_mean)) ** 2 for t, k in second) / max(n - 2, 1)
    error = 2 * (scatter / spread) ** 0.5 * span if spread else 0.0
    rise = slope * span
    slack = max(slack_kib, slack_frac * k_mean)
    return rise <= max(slack, error), rise, error, min(ks), max(ks)


def table(head, rows, aligns=None):
    widths = [max(len(str(h)), *(len(str(r[i])) for r in rows)) if rows else len(str(h))
              for i, h in enumerate(head)]
    aligns = aligns or ["<"] + [">"] * (len(head) - 1)

    def fmt(cells):
        return "  ".join(f"{str(c):{a}{w}}" for c, a, w in zip(cells, aligns, widths)).rstrip()

    out = [fmt(head), fmt(["-" * w for w in widths])]
    out += [fmt(r) for r in rows]
    return "\n".join("  " + line for line in out)


def print_report(path):
    rows = []
    with open(path) as f:
        for line in f:
            if line.strip():
                rows.append(json.loads(line))
    by = {r["label"]: r for r in rows}
    runs = [r for r in rows if "cell" in r]
    concs = []
    for r in runs:
        if r["cell"] in ("direct", "nginx", "gateway", "cross") and r["conc"] not in concs:
            concs.append(r["conc"])

    # With BENCH_ROUNDS > 1 a cell has a run per round: the report uses
    # the median one by the CPU of the process under test (per request, or
    # per frame for streams), and lists every round's figure below.
    def cell(name, c=None):
        return median_run([r for r in runs if r["cell"] == name and (c is None or r["conc"] == c)],
                          CPU_KEY.get(name, "server_cpu_us_per_req"))

    m = by.get("machine", {})
    print()
    print(f"machine: {m.get('cpu', '?')}, {m.get('cores', '?')} cores "
          f"({m.get('usable_cores', '?')} usable), Linux {m.get('kernel', '?')}"
          + (f", {m['os']}" if m.get("os") else ""))
    print(f"command: {m.get('command', '?')}")
    print(f"workers: {m.get('workers', '?')} (the gateway's runtime threads; nginx's worker processes)")
    print(f"gateway: {m.get('gateway', '?')}")
    extra = [f"commit {m['commit']}" if m.get("commit") else "", m.get("nginx", ""), m.get("date", ""),
             f"load average before the runs {m['loadavg']}" if m.get("loadavg") else ""]
    print("         " + "; ".join(e for e in extra if e))

    if any(r.get("pair") in ("a", "b") for r in runs):
        print_pairs(by.get("pair", {}), runs)
        return

    # Non-streamed cells.
    if concs:
        d0 = next((r for r in runs if r["cell"] == "direct"), {})
        print()
        print(f"non-streamed chat, {num(d0.get('duration_s'), 2)} s measured per run "
              "(CPU: user + system from /proc/PID/stat over the window, per request):")
        body = []
        for c in concs:
            d = cell("direct", c)
            for name in ("direct", "nginx", "gateway", "cross"):
                r = cell(name, c)
                if not r:
                    continue
                first = name == "direct"
                body.append([
                    name, c, num(r.get("rps")), num(r.get("p50_us")), num(r.get("p99_us")),
                    "" if first else num(diff(r.get("p50_us"), d.get("p50_us"))),
                    "" if first else num(diff(r.get("p99_us"), d.get("p99_us"))),
                    num(r.get("server_cpu_us_per_req")), num(r.get("mock_cpu_us_per_req")),
                    r.get("errors", "-"),
                ])
        print(table(["cell", "conc", "req/s", "p50 µs", "p99 µs", "+p50 µs", "+p99 µs",
                     "CPU µs/req", "mock µs/req", "errors"], body))
        print("  direct: the mock itself (it is the process under test); nginx: its master and"
              " workers; gateway: OpenAI client to OpenAI vendor (passthrough); cross: Anthropic"
              " client to OpenAI vendor. +p50/+p99: over direct at the same concurrency.")
        print()
        for c in concs:
            n, g, x, d = cell("nginx", c), cell("gateway", c), cell("cross", c), cell("direct", c)
            parts = []
            if n and g:
                parts.append(f"gateway/nginx CPU per request {num(ratio(g.get('server_cpu_us_per_req'), n.get('server_cpu_us_per_req')), 2)}x, "
                             f"throughput {num(ratio(g.get('rps'), n.get('rps')), 2)}x")
            if d and g:
                parts.append(f"gateway/direct throughput {num(ratio(g.get('rps'), d.get('rps')), 2)}x")
            if g and x:
                parts.append(f"cross/passthrough CPU per request {num(ratio(x.get('server_cpu_us_per_req'), g.get('server_cpu_us_per_req')), 2)}x "
                             f"({num(x.get('server_cpu_us_per_req'))} vs {num(g.get('server_cpu_us_per_req'))} µs)")
            if parts:
                print(f"  c={c}: " + "; ".join(parts))
        if any("server_instr_per_req" in r for r in runs):
            print()
            print("instructions per request (perf stat; repeatable where time is not):")
            for r in runs:
                if "server_instr_per_req" in r:
                    print(f"  {r['label']}: process under test {num(r['server_instr_per_req'])}, "
                          f"mock {num(r.get('mock_instr_per_req'))}")

    mem = by.get("memory")
    if mem:
        print()
        started = ""
        if "rss_started_kib" in mem:
            started = (f" ({num(mib(mem['rss_started_kib']))} MiB right after start-up, "
                       f"{mem['idle_settle_s']} s before: what start-up freed, which the "
                       "allocator gives back after a second)")
        print(f"gateway resident memory (VmRSS): idle {num(mib(mem['rss_idle_kib']))} MiB{started}; "
              f"after the load {num(mib(mem['rss_after_load_kib']))} MiB; "
              f"after {mem['quiet_s']} s quiet {num(mib(mem['rss_after_quiet_kib']))} MiB")
        if "anon_idle_kib" in mem:
            anon_started = ""
            if "anon_started_kib" in mem:
                anon_started = f" ({num(mib(mem['anon_started_kib']))} MiB right after start-up)"
            print(f"  of which private (RssAnon): idle {num(mib(mem['anon_idle_kib']))} MiB{anon_started}; "
                  f"after the load {num(mib(mem['anon_after_load_kib']))} MiB; "
                  f"after the quiet spell {num(mib(mem['anon_after_quiet_kib']))} MiB. The rest maps"
                  " files: the binary's code, the compiled adapters, libraries (shared with the"
                  " page cache)")

    st = by.get("storage")
    calls = sum(r.get("requests", 0) - r.get("errors", 0) + r.get("warmup_ok", 0)
                for r in runs if r["cell"] in ("gateway", "cross"))
    per_call = None
    if st:
        grown = st["bytes_after"] - st["bytes_before"]
        wal = st["wal_after"] - st["wal_before"]
        per_call = grown / calls if calls else None
        print()
        print(f"durable storage (the gateway's data folder, after a checkpoint): "
              f"{num(st['bytes_before'])} -> {num(st['bytes_after'])} bytes "
              f"(redb and other files {wal_sign(grown - wal)}, WAL segments {wal_sign(wal)}) "
              f"over {num(calls)} successful non-streamed gateway calls (warm-ups included): "
              f"{num(per_call)} bytes/call")
        if calls:
            print(f"  of which redb and other files {num((grown - wal) / calls)} bytes/call, "
                  f"WAL segments {num(wal / calls)} bytes/call")

    ds, gs = cell("direct-stream") or None, cell("gateway-stream") or None
    ns = cell("nginx-stream") or None
    if ds or gs:
        print()
        s0 = ds or gs
        print(f"streamed (role chunk and first delta at once, 63 more deltas 20 ms apart, finish, [DONE]); "
              f"{s0['conc']} streams at once, "
              f"{num(s0.get('duration_s'), 2)} s measured:")
        body = []
        for r in (ds, ns, gs):
            if r:
                body.append([r["cell"].replace("-stream", ""), num(r.get("requests")), num(r.get("frames")),
                             num(r.get("ttft_p50_us")), num(r.get("ttft_p99_us")),
                             num((r.get("p50_us") or 0) / 1000), num(r.get("server_cpu_us_per_frame"), 2),
                             num(r.get("mock_cpu_us_per_frame"), 2), r.get("errors", "-")])
        print(table(["cell", "streams", "frames", "TTFT p50 µs", "TTFT p99 µs", "stream p50 ms",
                     "CPU µs/frame", "mock µs/frame", "errors"], body))
        if ds and gs:
            print(f"  added time to first token: p50 {signed(diff(gs.get('ttft_p50_us'), ds.get('ttft_p50_us')))} µs, "
                  f"p99 {signed(diff(gs.get('ttft_p99_us'), ds.get('ttft_p99_us')))} µs; "
                  f"gateway CPU per relayed frame {num(gs.get('server_cpu_us_per_frame'), 2)} µs "
                  f"({num(gs.get('frames'))} frames over the window)")
        if ds and ns:
            # The floor a hop sets on this machine: nginx relays each frame
            # with no translation, counting, books or guest call.
            times = ratio(gs and gs.get("server_cpu_us_per_frame"), ns.get("server_cpu_us_per_frame"))
            print(f"  the nginx hop: added time to first token p50 "
                  f"{signed(diff(ns.get('ttft_p50_us'), ds.get('ttft_p50_us')))} µs, "
                  f"p99 {signed(diff(ns.get('ttft_p99_us'), ds.get('ttft_p99_us')))} µs; "
                  f"CPU per relayed frame {num(ns.get('server_cpu_us_per_frame'), 2)} µs"
                  + (f" (the gateway's {num(times, 2)}x that)" if times is not None else ""))

    rounds = {}
    for r in runs:
        if r["cell"] != "soak":
            rounds.setdefault((r["cell"], r["conc"]), []).append(r)
    if any(len(v) > 1 for v in rounds.values()):
        print()
        print("rounds: CPU µs per request (per frame for streams) of the process under test in each round,"
              " in order; the tables show each cell's median round")
        for (name, c), rs in rounds.items():
            key = CPU_KEY.get(name, "server_cpu_us_per_req")
            print(f"  {name} c={c}: " + ", ".join(num(r.get(key), 1) for r in rs))

    soak = by.get("soak-memory")
    if soak:
        srun = next((r for r in runs if r["cell"] == "soak"), {})
        # [seconds, VmRSS KiB, RssAnon KiB]; runs before RssAnon was
        # sampled have only the first two.
        samples = soak["samples"]
        anon = [s[2] for s in samples if len(s) > 2]
        print()
        print(f"soak: {num(srun.get('duration_s'), 0)} s at {srun.get('conc', '?')} connections through the gateway, "
              f"{num(srun.get('rps'))} req/s, errors {srun.get('errors', '-')}; RSS read every {soak['every_s']} s (MiB"
              + (f"; every {SOAK_PRINT_EVERY_S} s shown)" if soak["every_s"] < SOAK_PRINT_EVERY_S else ")")
              + (", private (RssAnon) in brackets:" if anon else ":"))
        shown = [s for s in samples if s[0] % SOAK_PRINT_EVERY_S == 0] or samples
        line = ", ".join(f"{s[0]}s {num(mib(s[1]))}" + (f" ({num(mib(s[2]))})" if len(s) > 2 else "")
                         for s in shown)
        print(f"  {line}")
        series = [("VmRSS", [(s[0], s[1]) for s in samples])]
        if len(anon) == len(samples):
            series.append(("RssAnon", [(s[0], s[2]) for s in samples]))
        for name, kib in series:
            v = soak_verdict(kib)
            if not v:
                print(f"  (fewer than {SOAK_MIN_SAMPLES} samples: too short to say whether it is flat)")
                break
            flat, rise, error, low, high = v
            print(f"  {name}: {num(mib(low))} to {num(mib(high))} MiB over the second half; "
                  f"the least-squares line through it rises {mib(rise):+.1f} ± {mib(error):.1f} MiB: "
                  + ("flat" if flat else "still growing"))

    # Targets.
    print()
    print("targets (issue 13, item 2; informational, nothing fails on them):")
    g32, n32, x32 = cell("gateway", 32), cell("nginx", 32), cell("cross", 32)
    d1, g1 = cell("direct", 1), cell("gateway", 1)
    t = []

    def target(name, value, limit, unit, better="low", shown=None):
        if value is None:
            t.append([name, "n/a", "n/a"])
            return
        ok = value <= limit if better == "low" else value >= limit
        digits = 2 if unit == "x" else 1
        t.append([name, shown or f"{num(value, digits)}{unit}",
                  "ok" if ok else "over" if better == "low" else "under"])

    target(f"CPU/request at c=32 <= {CPU_PER_REQ_US} µs", g32.get("server_cpu_us_per_req"), CPU_PER_REQ_US, " µs")
    target(f"CPU/request at c=32 <= {CPU_VS_NGINX:g}x nginx's",
           ratio(g32.get("server_cpu_us_per_req"), n32.get("server_cpu_us_per_req")), CPU_VS_NGINX, "x")
    target(f"throughput at c=32 >= {RPS_VS_NGINX:g}x nginx's", ratio(g32.get("rps"), n32.get("rps")),
           RPS_VS_NGINX, "x", better="high")
    target(f"added p50 at c=1 <= {ADDED_P50_US} µs", diff(g1.get("p50_us"), d1.get("p50_us")), ADDED_P50_US, " µs")
    target(f"added p99 at c=1 <= {ADDED_P99_US} µs", diff(g1.get("p99_us"), d1.get("p99_us")), ADDED_P99_US, " µs")
    target(f"RSS idle <= {RSS_IDLE_MIB} MiB", mib(mem and mem["rss_idle_kib"]), RSS_IDLE_MIB, " MiB")
    target(f"RSS after the load <= {RSS_LOADED_MIB} MiB", mib(mem and mem["rss_after_load_kib"]),
           RSS_LOADED_MIB, " MiB")
    target(f"durable storage <= {BYTES_PER_CALL} bytes/text call", per_call, BYTES_PER_CALL, " B")
    target(f"stream CPU <= {CPU_PER_FRAME_US} µs/relayed frame", gs and gs.get("server_cpu_us_per_frame"),
           CPU_PER_FRAME_US, " µs")
    added_ttft = diff(gs and gs.get("ttft_p50_us"), ds and ds.get("ttft_p50_us"))
    added_ttft99 = diff(gs and gs.get("ttft_p99_us"), ds and ds.get("ttft_p99_us"))
    target(f"added TTFT (p50) <= {ADDED_TTFT_US} µs", added_ttft, ADDED_TTFT_US, " µs",
           shown=None if added_ttft is None else f"{num(added_ttft)} µs (p99 {signed(added_ttft99)})")
    target(f"cross-protocol CPU <= {CROSS_VS_PASS:g}x passthrough (c=32)",
           ratio(x32.get("server_cpu_us_per_req"), g32.get("server_cpu_us_per_req")), CROSS_VS_PASS, "x")
    print(table(["target", "measured", ""], t, ["<", ">", "<"]))


# The paired mode's cells: (cell, what its CPU is per, the loadgen field).
PAIR_CELLS = (("pair-gateway", "request", "server_cpu_us_per_req"),
              ("pair-cross", "request", "server_cpu_us_per_req"),
              ("pair-stream", "frame", "server_cpu_us_per_frame"))


def median(xs):
    """The median of the known values of xs, or None."""
    known = [x for x in xs if x is not None]
    return statistics.median(known) if known else None


def pair_rows(runs, cell, conc, key):
    """[(round, A's run, B's run)] of one paired cell, by round."""
    sides = {}
    for r in runs:
        if r.get("cell") == cell and r.get("conc") == conc and r.get("pair") in ("a", "b"):
            sides.setdefault(r.get("round"), {})[r["pair"]] = r
    return [(n, s.get("a", {}), s.get("b", {})) for n, s in sorted(sides.items(), key=lambda kv: kv[0] or 0)]


def print_pairs(pair, runs):
    """The paired mode: each round's A and B, loaded at the same time, and
    the median of B's CPU over A's (what a change did, with the spell's
    slowness shared by both sides)."""
    print(f"pair: A {pair.get('a', '?')} with {pair.get('a_adapters', '?')}; "
          f"B {pair.get('b', '?')} with {pair.get('b_adapters', '?')}; "
          "loaded at the same time, each in front of a mock of its own")
    for cell, per, key in PAIR_CELLS:
        concs = sorted({r["conc"] for r in runs if r.get("cell") == cell})
        for c in concs:
            rows = pair_rows(runs, cell, c, key)
            mock_key = key.replace("server_", "mock_", 1)
            stream = per == "frame"
            body = []
            for n, a, b in rows:
                line = [n, num(a.get(key), 2), num(b.get(key), 2), num(ratio(b.get(key), a.get(key)), 3),
                        num(a.get(mock_key), 2), num(b.get(mock_key), 2)]
                if stream:
                    line += [num(a.get("ttft_p50_us")), num(b.get("ttft_p50_us"))]
                else:
                    line += [num(a.get("rps")), num(b.get("rps"))]
                line += [f"{a.get('errors', '-')}/{b.get('errors', '-')}"]
                body.append(line)
            print()
            print(f"{cell}, {c} {'streams' if stream else 'connections'} (CPU µs per {per} of each gateway; "
                  "its mock's beside it):")
            extra = ["A TTFT p50 µs", "B TTFT p50 µs"] if stream else ["A req/s", "B req/s"]
            print(table(["round", "A CPU", "B CPU", "B/A", "A mock", "B mock", *extra, "errors A/B"], body))
            ratios = [ratio(b.get(key), a.get(key)) for _, a, b in rows]
            diffs = [diff(b.get(key), a.get(key)) for _, a, b in rows]
            m, d = median(ratios), median(diffs)
            if m is not None:
                print(f"  B/A median {num(m, 3)} over {sum(x is not None for x in ratios)} rounds "
                      f"(B - A median {num(d, 2)} µs per {per})")


# Which CPU figure picks a cell's median round.
CPU_KEY = {"direct-stream": "server_cpu_us_per_frame", "nginx-stream": "server_cpu_us_per_frame",
           "gateway-stream": "server_cpu_us_per_frame"}


def median_run(candidates, key):
    """The run whose `key` is the median of the candidates' (the lower of
    the middle two for an even count); {} when there is none."""
    known = sorted((r for r in candidates if r.get(key) is not None), key=lambda r: r[key])
    if not known:
        return candidates[0] if candidates else {}
    return known[(len(known) - 1) // 2]


def signed(x):
    if x is None:
        return "-"
    return f"{'+' if x >= 0 else ''}{x:,}"


def wal_sign(x):
    return f"{'+' if x >= 0 else ''}{x:,}"


def main(argv):
    if len(argv) == 8 and argv[1] == "augment":
        print(augment(*argv[2:8]))
    elif len(argv) in (6, 7) and argv[1] == "machine":
        print(machine(*argv[2:]))
    elif len(argv) >= 3 and len(argv) % 2 == 1 and argv[1] == "tag":
        print(tag(argv[2], *argv[3:]))
    elif len(argv) == 3 and argv[1] == "print":
        print_report(argv[2])
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main(sys.argv)
