#!/usr/bin/env bash
# `make bench`: what the gateway costs in latency and throughput.
#
# Starts the upstream simulator and the gateway (free loopback ports, a temp
# folder, the demo's models and channels, a rate limit no run can hit), then
# for each concurrency runs loadgen against the simulator directly and against
# the gateway, and prints the difference. Raw loadgen JSON lines go to
# target/bench/latest.jsonl, the two processes' logs to target/bench/*.log.
#
# Env knobs: BENCH_DURATION (measured seconds per run, default 10),
# BENCH_WARMUP (seconds, default 2), BENCH_CONCURRENCY (default "1 32"),
# BENCH_CROSS (0 skips the cross-protocol cell: Anthropic client, OpenAI vendor).
#
# loadgen, the simulator and the gateway share the machine's cores, so the
# absolute numbers are modest; the gateway/direct ratio is what to compare.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
BIN="$ROOT/target/release"
TEMPLATE="$ROOT/tests/demo/gateway.toml"
OUT_DIR="$ROOT/target/bench"
OUT="$OUT_DIR/latest.jsonl"
DURATION="${BENCH_DURATION:-10}"
WARMUP="${BENCH_WARMUP:-2}"
CONCURRENCY="${BENCH_CONCURRENCY:-1 32}"
READY_TIMEOUT=30
STOP_TIMEOUT=15

SIM_PID=""
GW_PID=""
LOADGEN_PID=""
TMP=""

say() { printf 'bench: %s\n' "$*" >&2; }
die() {
    say "error: $*"
    exit 1
}

is_uint() { [[ "$1" =~ ^[0-9]+$ ]]; }
if ! is_uint "$DURATION" || ((DURATION == 0)); then
    die "BENCH_DURATION must be a positive integer, got '$DURATION'"
fi
is_uint "$WARMUP" || die "BENCH_WARMUP must be a non-negative integer, got '$WARMUP'"
[[ -n "${CONCURRENCY// /}" ]] || die "BENCH_CONCURRENCY is empty"
for c in $CONCURRENCY; do
    if ! is_uint "$c" || ((c == 0)); then
        die "BENCH_CONCURRENCY must be positive integers, got '$c'"
    fi
done

for b in gateway upstream-sim loadgen; do
    [[ -x "$BIN/$b" ]] || die "$BIN/$b is missing: run make build"
done
shopt -s nullglob
wasm=("$ROOT"/build/adapters/*.wasm)
shopt -u nullglob
((${#wasm[@]} > 0)) || die "no adapters in $ROOT/build/adapters: run make build"
command -v python3 >/dev/null || die "python3 is required"

# --- process handling ----------------------------------------------------------

# shellcheck source=tests/proc.sh
source "$ROOT/tests/proc.sh"

# shellcheck disable=SC2317 # called from traps
cleanup() {
    local status=$?
    trap - EXIT INT TERM
    stop_child "$LOADGEN_PID" loadgen
    stop_child "$GW_PID" gateway
    stop_child "$SIM_PID" simulator
    [[ -z "$TMP" ]] || rm -rf "$TMP"
    exit "$status"
}
trap cleanup EXIT
trap 'say interrupted; exit 130' INT
trap 'say terminated; exit 143' TERM

show_log() {
    say "last lines of $1:"
    tail -n 20 "$1" | sed 's/^/    /' >&2 || true
}

# Waits (bounded) for a line matching the ERE $3 in log $2 of process $1 (named
# $4); prints the line.
wait_ready() {
    local pid="$1" log="$2" pattern="$3" name="$4" i line
    for ((i = 0; i < READY_TIMEOUT * 10; i++)); do
        if line=$(grep -m1 -E "$pattern" "$log" 2>/dev/null); then
            printf '%s\n' "$line"
            return 0
        fi
        if ! kill -0 "$pid" 2>/dev/null; then
            say "error: the $name exited while starting"
            show_log "$log"
            exit 1
        fi
        sleep 0.1
    done
    say "error: the $name was not ready within ${READY_TIMEOUT}s"
    show_log "$log"
    exit 1
}

# --- start ---------------------------------------------------------------------

mkdir -p "$OUT_DIR"
TMP=$(mktemp -d "${TMPDIR:-/tmp}/gateway-bench.XXXXXX")
SIM_LOG="$OUT_DIR/simulator.log"
GW_LOG="$OUT_DIR/gateway.log"
SIM_KEY="sim-$(od -An -N20 -tx1 /dev/urandom | tr -d ' \n')"
ADMIN_KEY="adm-$(od -An -N20 -tx1 /dev/urandom | tr -d ' \n')"
export NO_COLOR=1 GATEWAY_ADMIN_KEY="$ADMIN_KEY" SIM_API_KEY="$SIM_KEY"

# Port 0 everywhere; the ready lines say which ports were picked.
# Logs are emptied here, not by the `&` commands' own redirections: those run
# in the forked child, possibly after wait_ready has read last run's lines.
: >"$SIM_LOG"
: >"$GW_LOG"
UPSTREAM_SIM_API_KEY="$SIM_KEY" "$BIN/upstream-sim" --listen 127.0.0.1:0 >>"$SIM_LOG" 2>&1 &
SIM_PID=$!
line=$(wait_ready "$SIM_PID" "$SIM_LOG" 'upstream-sim listening on http://127\.0\.0\.1:[0-9]+' simulator)
SIM_URL=$(sed -E 's|.*listening on (http://[0-9.:]+).*|\1|' <<<"$line")

CONFIG="$TMP/gateway.toml"
{
    sed -E \
        -e 's|^listen = "[^"]*"|listen = "127.0.0.1:0"|' \
        -e "s|^base_url = \"http://127\.0\.0\.1:[0-9]+(/v1)?\"|base_url = \"$SIM_URL\1\"|" \
        -e "s|^data_dir = .*|data_dir = \"$TMP/data\"|" \
        -e "s|^adapters_dir = .*|adapters_dir = \"$ROOT/build/adapters\"|" \
        -e "s|^policies_dir = .*|policies_dir = \"$ROOT/build/policies\"|" \
        "$TEMPLATE"
    printf '\n[limits]\nrate_limit_requests = 1000000000\n'
} >"$CONFIG"
grep -qF "base_url = \"$SIM_URL/v1\"" "$CONFIG" || die "could not derive the bench config from $TEMPLATE"
"$BIN/gateway" check-config --config "$CONFIG" >/dev/null || die "the generated config $CONFIG is invalid (see above)"

"$BIN/gateway" serve --config "$CONFIG" >>"$GW_LOG" 2>&1 &
GW_PID=$!
line=$(wait_ready "$GW_PID" "$GW_LOG" 'gateway listening on http://[0-9.:]+ \(admin on http://[0-9.:]+\)' gateway)
GW_URL=$(sed -E 's|.*gateway listening on (http://[0-9.:]+) .*|\1|' <<<"$line")
export GATEWAY_ADMIN_URL
GATEWAY_ADMIN_URL=$(sed -E 's|.*\(admin on (http://[0-9.:]+)\).*|\1|' <<<"$line")

json_field() {
    python3 -c 'import json, sys; print(json.load(sys.stdin)[sys.argv[1]])' "$1"
}
out=$(timeout 30 "$BIN/gateway" admin account create --name bench --trial-credit 1000000) ||
    die "could not create the bench account"
ACCOUNT_ID=$(json_field id <<<"$out")
out=$(timeout 30 "$BIN/gateway" admin token create --account "$ACCOUNT_ID" --name bench) ||
    die "could not create the bench token"
TOKEN=$(json_field key <<<"$out")

say "simulator $SIM_URL, gateway $GW_URL; ${DURATION}s per run after ${WARMUP}s warm-up; concurrency: $CONCURRENCY"
say "$(nproc 2>/dev/null || echo '?') cores shared by loadgen, the simulator and the gateway"

# --- runs ------------------------------------------------------------------------

: >"$OUT"
FAILED=0
RUN_TIMEOUT=$((WARMUP + DURATION + 60))

# Instruction counts (repeatable on a noisy shared machine, unlike time) when
# perf can read hardware counters here.
PERF=""
if command -v perf >/dev/null 2>&1 && perf stat -e instructions true >/dev/null 2>&1; then
    PERF=perf
fi

# count PID FILE: instructions PID executes during the measured window; the
# counter's own pid is added to COUNTERS.
COUNTERS=()
count() {
    [[ -n "$PERF" ]] || return 0
    (sleep "$WARMUP" && perf stat -x, -e instructions -p "$1" -o "$2" -- sleep "$DURATION") >/dev/null 2>&1 &
    COUNTERS+=("$!")
}

# cpu PID FILE: the CPU time (user + system clock ticks, from /proc) PID
# uses during the measured window, written as "ticks ticks_per_second".
TICKS=$(getconf CLK_TCK 2>/dev/null || echo 100)
cpu_ticks() {
    # Fields 14 and 15 of /proc/PID/stat, counted after the command name.
    awk '{ sub(/.*\) /, ""); print $12 + $13 }' "/proc/$1/stat" 2>/dev/null || echo 0
}
cpu() {
    (
        sleep "$WARMUP"
        a=$(cpu_ticks "$1")
        sleep "$DURATION"
        b=$(cpu_ticks "$1")
        echo "$((b - a)) $TICKS" >"$2"
    ) >/dev/null 2>&1 &
    COUNTERS+=("$!")
}

# run LABEL URL KEY MODEL CONCURRENCY [PROTOCOL]: one loadgen run, its JSON
# line appended to $OUT.
run() {
    local label="$1" url="$2" key="$3" model="$4" c="$5" proto="${6:-openai-chat}" out status=0 json
    say "running $label ..."
    COUNTERS=()
    count "$GW_PID" "$TMP/$label.gw.instr"
    count "$SIM_PID" "$TMP/$label.sim.instr"
    cpu "$GW_PID" "$TMP/$label.gw.cpu"
    cpu "$SIM_PID" "$TMP/$label.sim.cpu"
    # In the background so that a signal's trap runs at once, not after the run.
    local proto_args=()
    [[ "$proto" == openai-chat ]] || proto_args=(--protocol "$proto")
    timeout "$RUN_TIMEOUT" "$BIN/loadgen" --url "$url" --key "$key" --model "$model" \
        --concurrency "$c" --duration-secs "$DURATION" --warmup-secs "$WARMUP" --label "$label" \
        "${proto_args[@]}" \
        >"$TMP/loadgen.out" &
    LOADGEN_PID=$!
    wait "$LOADGEN_PID" || status=$?
    LOADGEN_PID=""
    out=$(cat "$TMP/loadgen.out")
    if [[ -n "$out" ]]; then
        say "  $(head -n 1 <<<"$out")"
    fi
    json=$(tail -n 1 <<<"$out")
    # The instruction counters end with the measured window.
    for p in "${COUNTERS[@]}"; do
        wait "$p" 2>/dev/null || true
    done
    if [[ "$json" == \{* ]]; then
        json=$(python3 - "$json" "$TMP/$label.gw.instr" "$TMP/$label.sim.instr" "$TMP/$label.gw.cpu" "$TMP/$label.sim.cpu" <<'PY'
import json, sys
r = json.loads(sys.argv[1])
def cpu_us(path):
    try:
        ticks, hz = open(path).read().split()
        return int(ticks) * 1_000_000 / int(hz)
    except (OSError, ValueError):
        return None
def count(path):
    try:
        for line in open(path):
            parts = line.split(",")
            if len(parts) > 2 and parts[2].startswith("instructions") and parts[0].isdigit():
                return int(parts[0])
    except OSError:
        pass
    return None
n = r["rps"] * r["duration_s"]
for key, path in (("gateway_instr_per_req", sys.argv[2]), ("sim_instr_per_req", sys.argv[3])):
    c = count(path)
    if c is not None and n:
        r[key] = round(c / n)
for key, path in (("gateway_cpu_us_per_req", sys.argv[4]), ("sim_cpu_us_per_req", sys.argv[5])):
    c = cpu_us(path)
    if c is not None and n:
        r[key] = round(c / n, 1)
print(json.dumps(r))
PY
)
    fi
    if [[ "$json" != \{* ]]; then
        say "error: loadgen $label gave no result (status $status)"
        FAILED=1
        return 0
    fi
    printf '%s\n' "$json" >>"$OUT"
    if ((status != 0)); then
        say "warning: loadgen $label exited with status $status (more than 1% errors?)"
        FAILED=1
    fi
    for p in "$SIM_PID" "$GW_PID"; do
        kill -0 "$p" 2>/dev/null || die "a server died during $label; see $SIM_LOG and $GW_LOG"
    done
}

for c in $CONCURRENCY; do
    run "direct-c$c" "$SIM_URL/v1/chat/completions" "$SIM_KEY" sim-chat "$c"
    run "gateway-c$c" "$GW_URL/v1/chat/completions" "$TOKEN" gpt-4o-mini "$c"
    # A cross-protocol cell: an Anthropic client, the OpenAI vendor (request,
    # answer and usage translated through the canonical form).
    if [[ "${BENCH_CROSS:-1}" != 0 ]]; then
        run "cross-c$c" "$GW_URL/v1/messages" "$TOKEN" gpt-4o-mini "$c" anthropic-messages
    fi
done

# --- table -----------------------------------------------------------------------

python3 - "$OUT" "$CONCURRENCY" <<'EOF'
import json, sys

rows = {}
for line in open(sys.argv[1]):
    r = json.loads(line)
    rows[r["label"]] = r

print()
head = ("conc", "direct rps", "p50 µs", "p99 µs", "gateway rps", "p50 µs", "p99 µs",
        "+p50 µs", "+p99 µs", "gw/direct", "errors d/g")
fmt = "{:>5} | {:>10} {:>8} {:>8} | {:>11} {:>8} {:>8} | {:>8} {:>8} | {:>9} | {:>10}"
print(fmt.format(*head))
print("-" * len(fmt.format(*head)))
for c in sys.argv[2].split():
    d, g = rows.get(f"direct-c{c}"), rows.get(f"gateway-c{c}")
    if not d or not g:
        print(f"{c:>5} | (missing run)")
        continue
    ratio = f"{g['rps'] / d['rps']:.2f}" if d["rps"] else "n/a"
    print(fmt.format(
        c,
        f"{d['rps']:.1f}", d["p50_us"], d["p99_us"],
        f"{g['rps']:.1f}", g["p50_us"], g["p99_us"],
        g["p50_us"] - d["p50_us"], g["p99_us"] - d["p99_us"],
        ratio,
        f"{d['errors']}/{g['errors']}",
    ))
print()
instr = [(c, rows.get(f"direct-c{c}", {}), rows.get(f"gateway-c{c}", {})) for c in sys.argv[2].split()]
if any("gateway_instr_per_req" in g for _, _, g in instr):
    print("instructions per request (perf stat; repeatable where wall time is not):")
    for c, d, g in instr:
        up = d.get("sim_instr_per_req")
        gw = g.get("gateway_instr_per_req")
        if up and gw:
            print(f"  c={c}: upstream simulator alone {up:,}; gateway {gw:,} ({gw / up:.1f}x the upstream's own work)")
    print()
cpu = [(c, rows.get(f"direct-c{c}", {}), rows.get(f"gateway-c{c}", {}), rows.get(f"cross-c{c}", {})) for c in sys.argv[2].split()]
if any("gateway_cpu_us_per_req" in g for _, _, g, _ in cpu):
    print("CPU time per request (user + system, /proc; coarse but available everywhere):")
    for c, d, g, x in cpu:
        parts = []
        if d.get("sim_cpu_us_per_req") is not None:
            parts.append(f"simulator alone {d['sim_cpu_us_per_req']} µs")
        if g.get("gateway_cpu_us_per_req") is not None:
            parts.append(f"gateway passthrough {g['gateway_cpu_us_per_req']} µs")
        if x.get("gateway_cpu_us_per_req") is not None:
            parts.append(f"gateway cross-protocol {x['gateway_cpu_us_per_req']} µs")
        print(f"  c={c}: " + "; ".join(parts))
    print()
cross = [(c, rows.get(f"gateway-c{c}", {}), rows.get(f"cross-c{c}", {})) for c in sys.argv[2].split()]
if any(x for _, _, x in cross):
    print("cross-protocol cell (Anthropic client -> OpenAI vendor) beside the passthrough (OpenAI -> OpenAI):")
    for c, g, x in cross:
        if not g or not x:
            print(f"  c={c}: (missing run)")
            continue
        line = (f"  c={c}: passthrough {g['rps']:.1f} rps p50 {g['p50_us']} µs; "
                f"cross {x['rps']:.1f} rps p50 {x['p50_us']} µs ({x['rps'] / g['rps']:.2f} of the passthrough's rate)")
        gi, xi = g.get("gateway_instr_per_req"), x.get("gateway_instr_per_req")
        if gi and xi:
            line += f"; gateway instructions/request {gi:,} vs {xi:,} (+{(xi - gi) / gi:.0%})"
        print(line)
    print()
EOF
say "raw results: ${OUT#"$ROOT/"}; logs: ${SIM_LOG#"$ROOT/"}, ${GW_LOG#"$ROOT/"}"
if ((FAILED)); then
    die "some runs failed or had errors (see above)"
fi
