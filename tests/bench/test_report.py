"""report.py's sections (the streamed one, the paired mode, the soak) and
its soak verdict, from raw results written as tests/bench/run.sh writes
them (one JSON object a line)."""

import json
import sys
from pathlib import Path

SCRIPT = Path(__file__).with_name("report.py")
sys.path.insert(0, str(SCRIPT.parent))

import report  # noqa: E402

MIB = 1024  # KiB, as run.sh records memory


def stream_run(cell, ttft_p50, ttft_p99, cpu_per_frame, label=None):
    """One streamed run's line after `report.py augment`."""
    return {
        "label": label or cell,
        "cell": cell,
        "conc": 32,
        "requests": 239,
        "frames": 17_100,
        "duration_s": 11.3,
        "p50_us": 1_335_300,
        "ttft_p50_us": ttft_p50,
        "ttft_p99_us": ttft_p99,
        "server_cpu_us_per_frame": cpu_per_frame,
        "mock_cpu_us_per_frame": 60.0,
        "errors": 0,
    }


def printed(tmp_path, capsys, rows):
    path = tmp_path / "latest.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    report.print_report(str(path))
    return capsys.readouterr().out


def test_the_nginx_hop_is_shown_beside_the_gateway(tmp_path, capsys):
    out = printed(tmp_path, capsys, [
        stream_run("direct-stream", 1_500, 7_000, 60.0),
        stream_run("nginx-stream", 2_000, 9_000, 27.5),
        stream_run("gateway-stream", 2_100, 10_000, 66.0),
    ])
    cells = [line.split()[0] for line in out.splitlines()
             if line.strip().startswith(("direct ", "nginx ", "gateway "))]
    assert cells == ["direct", "nginx", "gateway"]
    assert "added time to first token: p50 +600 µs, p99 +3,000 µs" in out
    assert ("the nginx hop: added time to first token p50 +500 µs, p99 +2,000 µs; "
            "CPU per relayed frame 27.50 µs (the gateway's 2.40x that)") in out
    assert "added TTFT (p50) <= 300 µs" in out


def test_a_run_without_nginx_prints_no_hop_line(tmp_path, capsys):
    out = printed(tmp_path, capsys, [
        stream_run("direct-stream", 1_500, 7_000, 60.0),
        stream_run("gateway-stream", 2_100, 10_000, 66.0),
    ])
    assert "added time to first token: p50 +600 µs" in out
    assert "nginx hop" not in out


def test_rounds_pick_the_median_nginx_stream_by_cpu_per_frame(tmp_path, capsys):
    out = printed(tmp_path, capsys, [
        stream_run("direct-stream", 1_500, 7_000, 60.0),
        stream_run("nginx-stream", 2_000, 9_000, 30.0, label="nginx-stream-r1"),
        stream_run("nginx-stream", 9_999, 9_999, 20.0, label="nginx-stream-r2"),
        stream_run("nginx-stream", 1_900, 9_000, 25.0, label="nginx-stream-r3"),
        stream_run("gateway-stream", 2_100, 10_000, 66.0),
    ])
    assert "CPU per relayed frame 25.00 µs" in out
    assert "nginx-stream c=32: 30.0, 20.0, 25.0" in out


def paired(cell, side, rnd, cpu, mock, conc=32, **more):
    """One side's run of the paired mode after `augment` and `tag`."""
    per = "frame" if cell == "pair-stream" else "req"
    return {"label": f"{cell}-r{rnd}-{side}", "cell": cell, "conc": conc, "pair": side, "round": rnd,
            "requests": 1_000, "rps": 2_000.0, "errors": 0,
            f"server_cpu_us_per_{per}": cpu, f"mock_cpu_us_per_{per}": mock, **more}


def test_the_paired_mode_shows_each_round_and_the_median_of_b_over_a(tmp_path, capsys):
    rows = [{"label": "pair", "a": "target/release/gateway", "b": "/tmp/old/gateway",
             "a_adapters": "build/adapters", "b_adapters": "build/adapters"}]
    for rnd, (a, b) in enumerate([(50.0, 45.0), (80.0, 76.0), (60.0, 51.0)], start=1):
        rows += [paired("pair-gateway", "a", rnd, a, 20.0), paired("pair-gateway", "b", rnd, b, 21.0)]
    rows += [paired("pair-stream", "a", 1, 40.0, 30.0, ttft_p50_us=1_200),
             paired("pair-stream", "b", 1, 44.0, 31.0, ttft_p50_us=1_100)]
    out = printed(tmp_path, capsys, rows)
    assert "pair: A target/release/gateway with build/adapters; B /tmp/old/gateway" in out
    # The three rounds' ratios are 0.9, 0.95 and 0.85; their differences
    # -5, -4 and -9 µs.
    assert "B/A median 0.900 over 3 rounds (B - A median -5.00 µs per request)" in out
    assert "B/A median 1.100 over 1 rounds (B - A median 4.00 µs per frame)" in out
    table_rows = [line.split() for line in out.splitlines() if line.strip().startswith("2 ")]
    assert table_rows == [["2", "80.00", "76.00", "0.950", "20.00", "21.00", "2,000.0", "2,000.0", "0/0"]]
    # No targets for a pair: the two sides are not the bench's cells.
    assert "targets" not in out


def test_a_tag_adds_members_with_digits_as_numbers():
    line = report.tag('{"label": "x"}', "pair", "a", "round", "3")
    assert json.loads(line) == {"label": "x", "pair": "a", "round": 3}


def soak_rows(samples, every_s=10):
    """A soak's run and its memory samples, as run.sh records them."""
    return [
        {"label": "soak-c32", "cell": "soak", "conc": 32, "requests": 1_500_000,
         "duration_s": 60.0, "rps": 25_000.0, "p50_us": 1_000, "errors": 0},
        {"label": "soak-memory", "every_s": every_s, "samples": samples},
    ]


def test_a_bounded_swing_is_flat_and_a_rising_level_is_growth():
    # Batches allocated and freed, read every 2 s: the last sample is 4 MiB
    # over the second half's lowest, but the level does not move.
    def swing(t):
        return (40 + (3 if t % 4 else -1)) * MIB

    flat, rise, error, low, high = report.soak_verdict([(t, swing(t)) for t in range(2, 302, 2)])
    assert flat and (low, high) == (39 * MIB, 43 * MIB)
    assert abs(rise) < 0.1 * MIB and error < 2 * MIB
    # A leak of 1 MiB a minute under the same swing: 2.5 MiB over a
    # 5-minute soak's second half, above the slack and the scatter's error.
    flat, rise, error, _, _ = report.soak_verdict([(t, swing(t) + t * MIB // 60) for t in range(2, 302, 2)])
    assert not flat and 2 * MIB < rise < 3 * MIB and error < 2 * MIB
    # The same leak over 60 s: 0.5 MiB, within the slack.
    assert report.soak_verdict([(t, swing(t) + t * MIB // 60) for t in range(2, 62, 2)])[0]
    # A rise above the slack that the scatter cannot tell from chance: the
    # second half of 20 s holds three samples, the last one high.
    few = [(10, 40 * MIB), (20, 40 * MIB), (30, 44 * MIB), (40, 38 * MIB), (50, 46 * MIB)]
    flat, rise, error, _, _ = report.soak_verdict(few)
    assert flat and MIB < rise < error
    # Too few samples to say.
    assert report.soak_verdict(few[:3]) is None


def test_the_soak_judges_the_whole_and_the_private_memory_apart(tmp_path, capsys):
    # Read every 2 s, shown every 10 s: VmRSS (the mapped code) climbs
    # through the second half; the private part swings around one level.
    samples = [[t, (40 + t // 2) * MIB, (18 + (2 if t % 4 else 0)) * MIB] for t in range(2, 52, 2)]
    out = printed(tmp_path, capsys, soak_rows(samples, every_s=2))
    assert "RSS read every 2 s (MiB; every 10 s shown), private (RssAnon) in brackets:" in out
    assert "  10s 45.0 (20.0), 20s 50.0 (18.0), 30s 55.0 (20.0), 40s 60.0 (18.0), 50s 65.0 (20.0)\n" in out
    assert ("VmRSS: 53.0 to 65.0 MiB over the second half; the least-squares line through it rises "
            "+12.0 ± 0.0 MiB: still growing") in out
    assert "RssAnon: 18.0 to 20.0 MiB over the second half; the least-squares line through it rises" in out
    assert out.split("RssAnon: ")[1].split("\n")[0].endswith(": flat")


def test_a_soak_recorded_without_the_private_memory_is_judged_on_vmrss(tmp_path, capsys):
    out = printed(tmp_path, capsys, soak_rows([
        [10, 40 * MIB], [20, 41 * MIB], [30, 41 * MIB], [40, 41 * MIB],
    ]))
    assert "RSS read every 10 s (MiB):" in out
    assert "10s 40.0, 20s 41.0" in out
    assert ("VmRSS: 41.0 to 41.0 MiB over the second half; the least-squares line through it rises "
            "+0.0 ± 0.0 MiB: flat") in out
    assert "RssAnon" not in out
