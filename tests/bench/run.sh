#!/usr/bin/env bash
# `make bench`: what the gateway costs, beside the same mock called directly
# and through a plain keep-alive nginx hop.
#
# Starts the upstream simulator (the fast mock), the gateway in front of it
# (free loopback ports, a temp folder, the demo's models and channels, a rate
# limit no run can hit) and an nginx reverse proxy in front of it too (config,
# pid file and temp files in the temp folder, run as the current user). Then,
# at each concurrency, runs tests/loadgen against the mock directly, through
# nginx, through the gateway (OpenAI client, OpenAI vendor: the passthrough)
# and, through the gateway, as an Anthropic client to the OpenAI vendor (the
# cross-protocol cell). Each run reports requests/s, p50, p99 and the CPU time
# (user + system, /proc/PID/stat, over the measured window) per request of
# the process under test (the mock itself when direct; nginx's master and
# workers; the gateway) and of the mock. Then a streamed test, direct,
# through nginx (unbuffered) and through the gateway: each stream a role
# chunk, 64 deltas 20 ms apart, the finish chunk and [DONE]
# (`[[sim:words=64,delta_delay_ms=20]]`), with time to the first content
# delta and CPU per relayed frame. Also: the
# gateway's resident memory idle (right after start-up, and 2 s later once
# the allocator has given back what start-up freed), after the load and
# after a quiet spell; its
# data folder's growth per successful non-streamed call; an optional soak.
# Ends with the machine, the command and a table against issue 13's targets
# (informational: a missed target does not fail the script; errors do).
#
# Raw results, one JSON object a line, go to target/bench/latest.jsonl; the
# processes' logs to target/bench/*.log (BENCH_OUT_DIR names another folder).
# The report is printed from the JSON lines by tests/bench/report.py.
#
# Env knobs:
#   BENCH_DURATION            measured seconds per run (default 10)
#   BENCH_WARMUP              unmeasured seconds before each run (default 2)
#   BENCH_CONCURRENCY         connections of the non-streamed runs (default "1 32")
#   BENCH_CROSS               0 skips the cross-protocol cell (Anthropic client,
#                             OpenAI vendor)
#   BENCH_WORKERS             threads of the gateway's runtime (`worker_threads`)
#                             and nginx's `worker_processes` (default 1: the
#                             load generator and the mock need the other core
#                             of a 2-core machine; "auto" gives both one per
#                             core)
#   BENCH_NGINX               0 skips the nginx hop; otherwise nginx comes from
#                             PATH or /usr/sbin, else `apt-get install nginx`
#                             (as root, or with sudo -n)
#   BENCH_STREAM              0 skips the streamed test
#   BENCH_STREAM_CONCURRENCY  streams at once in the streamed test (default 32)
#   BENCH_QUIET               seconds without load before the last memory
#                             reading (default 10)
#   BENCH_SOAK                seconds of an extra run at 32 connections against
#                             the gateway, its memory read every 2 s (default 0:
#                             none; e.g. 300; at least 20, at most 3600); flat
#                             unless a line fitted through the second half's
#                             samples rises by more than max(1 MiB, 2%) and
#                             by more than two standard errors of that rise
#   BENCH_ROUNDS              rounds of the runs (default 1, at most 9): each
#                             round runs every non-streamed cell at each
#                             concurrency, then (after the storage reading) each
#                             round runs the streamed pair; the report shows each
#                             cell's median round by CPU and lists every round's
#                             CPU, since one run moves a lot on a shared machine
#   BENCH_GATEWAY             the gateway binary measured (default
#                             target/pgo/gateway, which `make bench` builds with
#                             `make dist`: the build to run in production;
#                             target/release/gateway measures what the tests run)
#   BENCH_OUT_DIR             where the raw results and the logs go (default
#                             target/bench; `make dist`'s training run uses
#                             target/pgo/training)
#   BENCH_PAIR                1: the paired mode, for judging a change on a noisy
#                             machine. Two gateways, BENCH_GATEWAY ("A") and
#                             BENCH_PAIR_GATEWAY ("B"), each in front of a mock of
#                             its own, are loaded at the same time with the same
#                             load, so that a slow spell slows both alike: in each
#                             round the passthrough and (with BENCH_CROSS) the cross
#                             cell at each concurrency, then (with BENCH_STREAM) the
#                             streamed test. The report lists both sides' CPU per
#                             request (per frame for streams) round by round and the
#                             median of B's over A's. No direct or nginx cells, no
#                             memory, storage or soak readings, no targets.
#   BENCH_PAIR_GATEWAY        B's binary (default: BENCH_GATEWAY's)
#   BENCH_PAIR_ADAPTERS       B's adapter folder (default: build/adapters, A's; a
#                             copy of the folder made before a guest change pairs
#                             the old adapters against the new)
#   BENCH_IDLE_ONLY           1: start everything, read the idle memory, print
#                             it and stop, with no load (`make dist` profiles
#                             the gateway's start-up this way)
#
# loadgen, the mock, nginx and the gateway share the machine's cores, so the
# absolute numbers are modest; ratios within one run are what to compare.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
BIN="$ROOT/target/release"
GATEWAY="${BENCH_GATEWAY:-$ROOT/target/pgo/gateway}"
TEMPLATE="$ROOT/tests/demo/gateway.toml"
REPORT="$ROOT/tests/bench/report.py"
OUT_DIR="${BENCH_OUT_DIR:-$ROOT/target/bench}"
OUT="$OUT_DIR/latest.jsonl"
DURATION="${BENCH_DURATION:-10}"
WARMUP="${BENCH_WARMUP:-2}"
CONCURRENCY="${BENCH_CONCURRENCY:-1 32}"
CROSS="${BENCH_CROSS:-1}"
USE_NGINX="${BENCH_NGINX:-1}"
WORKERS="${BENCH_WORKERS:-1}"
STREAM="${BENCH_STREAM:-1}"
STREAM_CONCURRENCY="${BENCH_STREAM_CONCURRENCY:-32}"
QUIET="${BENCH_QUIET:-10}"
SOAK="${BENCH_SOAK:-0}"
IDLE_ONLY="${BENCH_IDLE_ONLY:-0}"
PAIR="${BENCH_PAIR:-0}"
PAIR_GATEWAY="${BENCH_PAIR_GATEWAY:-$GATEWAY}"
PAIR_ADAPTERS="${BENCH_PAIR_ADAPTERS:-$ROOT/build/adapters}"
ROUNDS="${BENCH_ROUNDS:-1}"
SOAK_CONCURRENCY=32
IDLE_SETTLE=2
# The soak reads the gateway's memory this often: its verdict fits a line
# through the samples, which needs many of them to tell a trend from the
# swing of batches allocated and freed.
SOAK_EVERY=2
READY_TIMEOUT=30
STOP_TIMEOUT=15
# The streamed test's request: the simulator's paced-stream directives (a
# role chunk and the first delta at once, then a delta every 20 ms).
STREAM_PROMPT='hello from the load generator [[sim:words=64,delta_delay_ms=20]]'
# Streams start spread over one stream's length (64 x 20 ms), so the streams
# at once keep distinct phases instead of arriving in bursts.
STREAM_ARGS=(--stream --prompt "$STREAM_PROMPT" --max-tokens 256 --ramp-ms 1280)

SIM_PID=""
GW_PID=""
NGINX_PID=""
LOADGEN_PID=""
SIM_B_PID=""
GW_B_PID=""
LOADGEN_B_PID=""
TMP=""

say() { printf 'bench: %s\n' "$*" >&2; }
die() {
    say "error: $*"
    exit 1
}

is_uint() { [[ "$1" =~ ^[0-9]+$ ]]; }
positive() {
    if ! is_uint "$2" || (($2 == 0)); then
        die "$1 must be a positive integer, got '$2'"
    fi
}
positive BENCH_DURATION "$DURATION"
((DURATION <= 600)) || die "BENCH_DURATION is at most 600, got $DURATION"
[[ -n "${CONCURRENCY// /}" ]] || die "BENCH_CONCURRENCY is empty"
for c in $CONCURRENCY; do
    positive "BENCH_CONCURRENCY (each)" "$c"
    ((c <= 1024)) || die "BENCH_CONCURRENCY is at most 1024 each, got $c"
done
positive BENCH_STREAM_CONCURRENCY "$STREAM_CONCURRENCY"
if [[ "$WORKERS" != auto ]]; then
    positive BENCH_WORKERS "$WORKERS"
    ((WORKERS <= 1024)) || die "BENCH_WORKERS is at most 1024, or auto"
fi
((STREAM_CONCURRENCY <= 1024)) || die "BENCH_STREAM_CONCURRENCY is at most 1024"
up_to() {
    if ! is_uint "$2" || (($2 > $3)); then
        die "$1 must be 0 to $3 seconds, got '$2'"
    fi
}
up_to BENCH_WARMUP "$WARMUP" 60
up_to BENCH_QUIET "$QUIET" 600
up_to BENCH_SOAK "$SOAK" 3600
if ! is_uint "$ROUNDS" || ((ROUNDS < 1 || ROUNDS > 9)); then
    die "BENCH_ROUNDS must be 1 to 9, got '$ROUNDS'"
fi
if ((SOAK > 0 && SOAK < 20)); then
    die "BENCH_SOAK must be at least 20 seconds (memory is read every ${SOAK_EVERY}s and judged on the second half)"
fi
for knob in CROSS USE_NGINX STREAM IDLE_ONLY PAIR; do
    [[ "${!knob}" == 0 || "${!knob}" == 1 ]] || die "BENCH_${knob#USE_} must be 0 or 1, got '${!knob}'"
done

for b in upstream-sim loadgen; do
    [[ -x "$BIN/$b" ]] || die "$BIN/$b is missing: run make bench-tools"
done
[[ -x "$GATEWAY" ]] || die "$GATEWAY is missing: run make dist (or set BENCH_GATEWAY)"
shopt -s nullglob
wasm=("$ROOT"/build/adapters/*.wasm)
shopt -u nullglob
((${#wasm[@]} > 0)) || die "no adapters in $ROOT/build/adapters: run make adapters"
if [[ "$PAIR" == 1 ]]; then
    [[ -x "$PAIR_GATEWAY" ]] || die "BENCH_PAIR_GATEWAY $PAIR_GATEWAY is not an executable"
    shopt -s nullglob
    wasm=("$PAIR_ADAPTERS"/*.wasm)
    shopt -u nullglob
    ((${#wasm[@]} > 0)) || die "no adapters in BENCH_PAIR_ADAPTERS $PAIR_ADAPTERS"
    # The pairs are gateways against gateways: no nginx hop to install.
    USE_NGINX=0
fi
command -v python3 >/dev/null || die "python3 is required"

# The command as typed, for the report (the knobs given, then how it ran).
COMMAND=""
for knob in BENCH_DURATION BENCH_WARMUP BENCH_CONCURRENCY BENCH_WORKERS BENCH_CROSS BENCH_NGINX BENCH_STREAM \
    BENCH_STREAM_CONCURRENCY BENCH_QUIET BENCH_SOAK BENCH_ROUNDS BENCH_GATEWAY BENCH_OUT_DIR \
    BENCH_IDLE_ONLY BENCH_PAIR BENCH_PAIR_GATEWAY BENCH_PAIR_ADAPTERS; do
    if [[ -n "${!knob+set}" ]]; then
        COMMAND+="$knob=$(printf '%q' "${!knob}") "
    fi
done
if [[ -n "${MAKELEVEL:-}" ]]; then
    COMMAND+="make bench"
else
    COMMAND+="tests/bench/run.sh"
fi

# --- nginx -----------------------------------------------------------------------

mkdir -p "$OUT_DIR"

find_nginx() {
    local n
    n=$(command -v nginx 2>/dev/null || true)
    if [[ -z "$n" && -x /usr/sbin/nginx ]]; then
        n=/usr/sbin/nginx
    fi
    printf '%s' "$n"
}

# Installs Debian's nginx package when there is no nginx (before anything
# starts, so the install's time is nobody's load).
NGINX_BIN=""
if [[ "$USE_NGINX" == 1 ]]; then
    NGINX_BIN=$(find_nginx)
    if [[ -z "$NGINX_BIN" ]]; then
        command -v apt-get >/dev/null ||
            die "nginx is not installed and there is no apt-get: install nginx, or set BENCH_NGINX=0"
        AS_ROOT=()
        if ((EUID != 0)); then
            command -v sudo >/dev/null || die "nginx is not installed and installing it needs root (or BENCH_NGINX=0)"
            AS_ROOT=(sudo -n)
        fi
        APT_LOG="$OUT_DIR/apt.log"
        say "nginx is not installed: apt-get install nginx (log: ${APT_LOG#"$ROOT/"}) ..."
        apt_install() {
            timeout 600 "${AS_ROOT[@]}" env DEBIAN_FRONTEND=noninteractive \
                apt-get install -y -q --no-install-recommends nginx >>"$APT_LOG" 2>&1
        }
        : >"$APT_LOG"
        if ! apt_install; then
            # A fresh machine may have no package lists yet.
            timeout 600 "${AS_ROOT[@]}" apt-get update -q >>"$APT_LOG" 2>&1 || true
            apt_install || die "apt-get install nginx failed (see ${APT_LOG#"$ROOT/"}); BENCH_NGINX=0 skips the nginx hop"
        fi
        NGINX_BIN=$(find_nginx)
        [[ -n "$NGINX_BIN" ]] || die "nginx is still not found after apt-get install nginx"
    fi
fi

# --- process handling ----------------------------------------------------------

# shellcheck source=tests/proc.sh
source "$ROOT/tests/proc.sh"

# shellcheck disable=SC2317 # called from traps
cleanup() {
    local status=$?
    trap - EXIT INT TERM
    stop_child "$LOADGEN_PID" loadgen
    stop_child "$LOADGEN_B_PID" "loadgen (B)"
    stop_child "$NGINX_PID" nginx
    stop_child "$GW_PID" gateway
    stop_child "$GW_B_PID" "gateway (B)"
    stop_child "$SIM_PID" simulator
    stop_child "$SIM_B_PID" "simulator (B)"
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

# The pids whose parent is $1.
children_of() {
    local f line rest ppid
    for f in /proc/[0-9]*/stat; do
        { read -r line <"$f"; } 2>/dev/null || continue
        rest=${line##*) }
        # After the command name: state, then the parent pid.
        read -r _ ppid _ <<<"$rest" || continue
        if [[ "$ppid" == "$1" ]]; then
            f=${f#/proc/}
            printf '%s\n' "${f%/stat}"
        fi
    done
}

# Resident memory of pid $1 in KiB: VmRSS, or the field named $2 of
# /proc/PID/status (RssAnon: the process's private memory; the rest of
# VmRSS maps files, above all the binary's own code).
rss_kib() {
    local kib
    kib=$(awk -v f="^${2:-VmRSS}:" '$0 ~ f { print $2 }' "/proc/$1/status" 2>/dev/null) || true
    printf '%s\n' "${kib:-0}"
}

# --- start ---------------------------------------------------------------------

TMP=$(mktemp -d "${TMPDIR:-/tmp}/gateway-bench.XXXXXX")
SIM_LOG="$OUT_DIR/simulator.log"
GW_LOG="$OUT_DIR/gateway.log"
NGINX_LOG="$OUT_DIR/nginx.log"
SIM_KEY="sim-$(od -An -N20 -tx1 /dev/urandom | tr -d ' \n')"
ADMIN_KEY="adm-$(od -An -N20 -tx1 /dev/urandom | tr -d ' \n')"
export NO_COLOR=1 GATEWAY_ADMIN_KEY="$ADMIN_KEY" SIM_API_KEY="$SIM_KEY"

# Port 0 everywhere; the ready lines say which ports were picked.
# Logs are emptied by the starting functions, not by the `&` commands' own
# redirections: those run in the forked child, possibly after wait_ready has
# read last run's lines.
# The mock keeps no record of the requests it gets (`--keep-requests 0`): the
# record is for tests, and ten thousand kept requests slowed the simulator as
# the runs went on (see the README's *Benchmark*).
#
# start_mock LOG PID_VAR URL_VAR: a mock on a free loopback port.
start_mock() {
    local log="$1" line
    local -n pid_var="$2" url_var="$3"
    : >"$log"
    UPSTREAM_SIM_API_KEY="$SIM_KEY" "$BIN/upstream-sim" --listen 127.0.0.1:0 --keep-requests 0 >>"$log" 2>&1 &
    pid_var=$!
    line=$(wait_ready "$pid_var" "$log" 'upstream-sim listening on http://127\.0\.0\.1:[0-9]+' simulator)
    url_var=$(sed -E 's|.*listening on (http://[0-9.:]+).*|\1|' <<<"$line")
}

json_field() {
    python3 -c 'import json, sys; print(json.load(sys.stdin)[sys.argv[1]])' "$1"
}

# start_gateway BINARY ADAPTERS_DIR MOCK_URL DATA_DIR CONFIG LOG PID_VAR URL_VAR
# ADMIN_URL_VAR TOKEN_VAR: a gateway with the demo's models and channels in
# front of the mock at MOCK_URL (free loopback ports, a rate limit no run can
# hit), an account with credit and its token.
start_gateway() {
    local bin="$1" adapters="$2" mock="$3" data="$4" config="$5" log="$6" line out account
    local -n pid_var="$7" url_var="$8" admin_var="$9" token_var="${10}"
    {
        # A top-level key, so before the template's first table.
        if [[ "$WORKERS" != auto ]]; then
            printf 'worker_threads = %s\n' "$WORKERS"
        fi
        sed -E \
            -e 's|^listen = "[^"]*"|listen = "127.0.0.1:0"|' \
            -e "s|^base_url = \"http://127\.0\.0\.1:[0-9]+(/v1)?\"|base_url = \"$mock\1\"|" \
            -e "s|^data_dir = .*|data_dir = \"$data\"|" \
            -e "s|^adapters_dir = .*|adapters_dir = \"$adapters\"|" \
            -e "s|^policies_dir = .*|policies_dir = \"$ROOT/build/policies\"|" \
            "$TEMPLATE"
        printf '\n[limits]\nrate_limit_requests = 1000000000\n'
    } >"$config"
    grep -qF "base_url = \"$mock/v1\"" "$config" || die "could not derive the bench config from $TEMPLATE"
    "$bin" check-config --config "$config" >/dev/null || die "the generated config $config is invalid (see above)"
    : >"$log"
    "$bin" serve --config "$config" >>"$log" 2>&1 &
    pid_var=$!
    line=$(wait_ready "$pid_var" "$log" 'gateway listening on http://[0-9.:]+ \(admin on http://[0-9.:]+\)' gateway)
    url_var=$(sed -E 's|.*gateway listening on (http://[0-9.:]+) .*|\1|' <<<"$line")
    admin_var=$(sed -E 's|.*\(admin on (http://[0-9.:]+)\).*|\1|' <<<"$line")
    out=$(GATEWAY_ADMIN_URL="$admin_var" timeout 30 "$bin" admin --json account create --name bench \
        --trial-credit 1000000) || die "could not create the bench account"
    account=$(json_field id <<<"$out")
    out=$(GATEWAY_ADMIN_URL="$admin_var" timeout 30 "$bin" admin --json token create --account "$account" \
        --name bench) || die "could not create the bench token"
    token_var=$(json_field key <<<"$out")
}

start_mock "$SIM_LOG" SIM_PID SIM_URL
DATA_DIR="$TMP/data"
export GATEWAY_ADMIN_URL
start_gateway "$GATEWAY" "$ROOT/build/adapters" "$SIM_URL" "$DATA_DIR" "$TMP/gateway.toml" "$GW_LOG" \
    GW_PID GW_URL GATEWAY_ADMIN_URL TOKEN

# `GET URL` with the mock's key answers 200 (bounded by a 2 s timeout).
http_ok() {
    python3 - "$1" "$SIM_KEY" <<'PY' >/dev/null 2>&1
import sys, urllib.request
req = urllib.request.Request(sys.argv[1], headers={"Authorization": "Bearer " + sys.argv[2]})
with urllib.request.urlopen(req, timeout=2) as r:
    sys.exit(0 if r.status == 200 else 1)
PY
}

# nginx: `worker_processes` BENCH_WORKERS (as many as the gateway's runtime
# threads), the mock as a keep-alive
# upstream, a loopback port picked free just before (retried if taken
# meanwhile), no access log, everything it writes in the temp folder; under
# /stream/ the same hop unbuffered, for the streamed test.
NGINX_URL=""
NGINX_PIDS=""
start_nginx() {
    local dir="$TMP/nginx" port user="" attempt i
    mkdir -p "$dir"
    if ((EUID == 0)); then
        # Workers would otherwise run as nobody; keep everyone the same user.
        user="user $(id -un) $(id -gn);"
    fi
    : >"$NGINX_LOG"
    for attempt in 1 2 3; do
        port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
        cat >"$dir/nginx.conf" <<EOF
$user
worker_processes $WORKERS;
daemon off;
pid $dir/nginx.pid;
error_log $NGINX_LOG warn;
events {
    worker_connections 4096;
}
http {
    access_log off;
    client_body_temp_path $dir/client_body;
    proxy_temp_path $dir/proxy;
    fastcgi_temp_path $dir/fastcgi;
    uwsgi_temp_path $dir/uwsgi;
    scgi_temp_path $dir/scgi;
    keepalive_requests 1000000;
    keepalive_timeout 75s;
    upstream mock {
        server ${SIM_URL#http://};
        keepalive 64;
        keepalive_requests 1000000;
    }
    server {
        listen 127.0.0.1:$port;
        location / {
            proxy_pass http://mock;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
        }
        # The streamed test's hop: /stream/v1/... is the mock's /v1/..., read
        # and written on unbuffered, as nginx is set up in front of SSE.
        location /stream/ {
            proxy_pass http://mock/;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            proxy_buffering off;
        }
    }
}
EOF
        # Both nginx (-e, error_log) and its console output append to the log.
        # shellcheck disable=SC2094
        "$NGINX_BIN" -p "$dir/" -c "$dir/nginx.conf" -e "$NGINX_LOG" >>"$NGINX_LOG" 2>&1 &
        NGINX_PID=$!
        for ((i = 0; i < READY_TIMEOUT * 10; i++)); do
            kill -0 "$NGINX_PID" 2>/dev/null || break
            if http_ok "http://127.0.0.1:$port/v1/models"; then
                NGINX_URL="http://127.0.0.1:$port"
                NGINX_PIDS=$(
                    printf '%s' "$NGINX_PID"
                    children_of "$NGINX_PID" | sed 's/^/,/' | tr -d '\n'
                )
                return 0
            fi
            sleep 0.1
        done
        stop_child "$NGINX_PID" nginx
        NGINX_PID=""
        say "nginx did not start on port $port (attempt $attempt)"
    done
    show_log "$NGINX_LOG"
    die "nginx did not start (see ${NGINX_LOG#"$ROOT/"})"
}
if [[ "$USE_NGINX" == 1 ]]; then
    start_nginx
fi

say "mock $SIM_URL, gateway $GW_URL${NGINX_URL:+, nginx $NGINX_URL (pids $NGINX_PIDS)}"
say "workers: $WORKERS (gateway runtime threads, nginx worker processes)"
say "${DURATION}s per run after ${WARMUP}s warm-up; concurrency: $CONCURRENCY; $(nproc 2>/dev/null || echo '?') cores shared by all"

# --- measuring helpers -----------------------------------------------------------

: >"$OUT"
FAILED=0
TICKS=$(getconf CLK_TCK 2>/dev/null || echo 100)
record() { printf '%s\n' "$1" >>"$OUT"; }

# Everything the gateway logged is in redb (the admin usage read waits for a
# checkpoint); without it, a second for the periodic one.
checkpoint() {
    if ! timeout 30 "$GATEWAY" admin usage --limit 1 >/dev/null 2>&1; then
        say "warning: the admin usage read (a checkpoint) failed; waiting a second instead"
        sleep 1
    fi
}

# Bytes in the gateway's data folder: "total wal other" (wal: ledger-*.wal).
data_bytes() {
    python3 - "$DATA_DIR" <<'PY'
import os, sys
total = wal = 0
for root, _, files in os.walk(sys.argv[1]):
    for f in files:
        try:
            n = os.path.getsize(os.path.join(root, f))
        except OSError:
            continue
        total += n
        if f.endswith(".wal"):
            wal += n
print(total, wal, total - wal)
PY
}

# Instruction counts (repeatable on a noisy shared machine, unlike time) when
# perf can read hardware counters here.
PERF=""
if command -v perf >/dev/null 2>&1 &&
    perf stat -x, -e instructions -- true 2>&1 | grep -qE '^[0-9]+,'; then
    PERF=perf
fi

# count PIDS FILE: instructions PIDS (comma-separated) execute during the
# measured window; the counter's own pid is added to COUNTERS.
COUNTERS=()
count() {
    [[ -n "$PERF" ]] || return 0
    (sleep "$RUN_WARMUP" && perf stat -x, -e instructions -p "$1" -o "$2" -- sleep "$RUN_DURATION") >/dev/null 2>&1 &
    COUNTERS+=("$!")
}

# Waits for loadgen (in the background so that a signal's trap runs at once);
# with SAMPLE_EVERY > 0, reads the gateway's memory that often meanwhile into
# RSS_SAMPLES ("seconds:VmRSS KiB:RssAnon KiB" words).
RSS_SAMPLES=""
wait_loadgen() {
    local every="${SAMPLE_EVERY:-0}" start=$SECONDS next status=0
    next=$every
    if ((every > 0)); then
        while kill -0 "$LOADGEN_PID" 2>/dev/null && ((SECONDS - start <= RUN_TIMEOUT)); do
            sleep 1
            if ((SECONDS - start >= next)) && kill -0 "$LOADGEN_PID" 2>/dev/null; then
                RSS_SAMPLES+="$next:$(rss_kib "$GW_PID"):$(rss_kib "$GW_PID" RssAnon) "
                next=$((next + every))
            fi
        done
    fi
    wait "$LOADGEN_PID" || status=$?
    LOADGEN_PID=""
    return "$status"
}

# run LABEL CELL CONC URL KEY MODEL SERVER_PIDS [LOADGEN ARGS...]: one loadgen
# run (RUN_DURATION measured seconds after RUN_WARMUP), the CPU of
# SERVER_PIDS (comma-separated: the process under test) and of the mock
# counted over its window; its JSON line, with the per-request (and, for
# streams, per-frame) figures added, is appended to $OUT.
RUN_DURATION=$DURATION
RUN_WARMUP=$WARMUP
run() {
    local label="$1" cell="$2" c="$3" url="$4" key="$5" model="$6" server="$7" out status=0 json
    shift 7
    say "running $label ..."
    local run_timeout=$((RUN_WARMUP + RUN_DURATION + 60))
    RUN_TIMEOUT=$run_timeout
    COUNTERS=()
    count "$server" "$TMP/$label.server.instr"
    count "$SIM_PID" "$TMP/$label.mock.instr"
    timeout "$run_timeout" "$BIN/loadgen" --url "$url" --key "$key" --model "$model" \
        --concurrency "$c" --duration-secs "$RUN_DURATION" --warmup-secs "$RUN_WARMUP" --label "$label" \
        --cpu "server=$server" --cpu "mock=$SIM_PID" "$@" \
        >"$TMP/loadgen.out" 2>"$TMP/loadgen.err" &
    LOADGEN_PID=$!
    wait_loadgen || status=$?
    out=$(cat "$TMP/loadgen.out")
    if [[ -n "$out" ]]; then
        say "  $(head -n 1 <<<"$out")"
    fi
    if [[ -s "$TMP/loadgen.err" ]]; then
        sed 's/^/    /' "$TMP/loadgen.err" >&2
    fi
    json=$(tail -n 1 <<<"$out")
    for p in "${COUNTERS[@]}"; do
        wait "$p" 2>/dev/null || true
    done
    if [[ "$json" == \{* ]]; then
        json=$(python3 "$REPORT" augment "$json" "$cell" "$c" "$TICKS" \
            "$TMP/$label.server.instr" "$TMP/$label.mock.instr")
    fi
    if [[ "$json" != \{* ]]; then
        say "error: loadgen $label gave no result (status $status)"
        FAILED=1
        return 0
    fi
    record "$json"
    if ((status != 0)); then
        say "warning: loadgen $label exited with status $status (more than 1% errors?)"
        FAILED=1
    fi
    for p in "$SIM_PID" "$GW_PID" ${NGINX_PID:+"$NGINX_PID"}; do
        kill -0 "$p" 2>/dev/null || die "a server died during $label; see the logs in ${OUT_DIR#"$ROOT/"}"
    done
}

# --- runs ------------------------------------------------------------------------

NGINX_VERSION=""
if [[ -n "$NGINX_URL" ]]; then
    NGINX_VERSION=$("$NGINX_BIN" -v 2>&1 | head -n 1 || true)
fi
record "$(python3 "$REPORT" machine "$COMMAND" "$ROOT" "$WORKERS" "${GATEWAY#"$ROOT/"}" "$NGINX_VERSION")"

# --- the paired mode (BENCH_PAIR=1) --------------------------------------------------

# pair_side SIDE LABEL C PATH MODEL [LOADGEN ARGS...]: side a's (GW_URL, in
# front of SIM_URL) or side b's (GW_B_URL, in front of SIM_B_URL) loadgen, in
# the background (its output in $TMP/LABEL-SIDE.*; its pid in LOADGEN_PID or
# LOADGEN_B_PID).
pair_side() {
    local side="$1" label="$2" c="$3" path="$4" model="$5"
    shift 5
    local url="$GW_URL" key="$TOKEN" server="$GW_PID" mock="$SIM_PID"
    if [[ "$side" == b ]]; then
        url="$GW_B_URL" key="$TOKEN_B" server="$GW_B_PID" mock="$SIM_B_PID"
    fi
    timeout "$((RUN_WARMUP + RUN_DURATION + 60))" "$BIN/loadgen" --url "$url$path" --key "$key" --model "$model" \
        --concurrency "$c" --duration-secs "$RUN_DURATION" --warmup-secs "$RUN_WARMUP" --label "$label-$side" \
        --cpu "server=$server" --cpu "mock=$mock" "$@" \
        >"$TMP/$label-$side.out" 2>"$TMP/$label-$side.err" &
    if [[ "$side" == a ]]; then
        LOADGEN_PID=$!
    else
        LOADGEN_B_PID=$!
    fi
}

# run_pair LABEL CELL ROUND C PATH MODEL [LOADGEN ARGS...]: the same load on A
# and on B at the same time; each side's JSON line, with its side and round,
# is appended to $OUT. The side started first changes from round to round.
run_pair() {
    local label="$1" cell="$2" round="$3" c="$4" path="$5" model="$6" side json status first=a second=b
    shift 6
    say "running $label, A and B at once ..."
    if ((round % 2 == 0)); then
        first=b second=a
    fi
    pair_side "$first" "$label" "$c" "$path" "$model" "$@"
    pair_side "$second" "$label" "$c" "$path" "$model" "$@"
    for side in a b; do
        status=0
        if [[ "$side" == a ]]; then
            wait "$LOADGEN_PID" || status=$?
            LOADGEN_PID=""
        else
            wait "$LOADGEN_B_PID" || status=$?
            LOADGEN_B_PID=""
        fi
        if [[ -s "$TMP/$label-$side.err" ]]; then
            sed "s/^/    $side: /" "$TMP/$label-$side.err" >&2
        fi
        json=$(tail -n 1 "$TMP/$label-$side.out")
        if [[ "$json" != \{* ]]; then
            say "error: loadgen $label-$side gave no result (status $status)"
            FAILED=1
            continue
        fi
        say "  $side: $(head -n 1 "$TMP/$label-$side.out")"
        json=$(python3 "$REPORT" augment "$json" "$cell" "$c" "$TICKS" "" "")
        record "$(python3 "$REPORT" tag "$json" pair "$side" round "$round")"
        if ((status != 0)); then
            say "warning: loadgen $label-$side exited with status $status (more than 1% errors?)"
            FAILED=1
        fi
    done
    for p in "$SIM_PID" "$GW_PID" "$SIM_B_PID" "$GW_B_PID"; do
        kill -0 "$p" 2>/dev/null || die "a server died during $label; see the logs in ${OUT_DIR#"$ROOT/"}"
    done
}

if [[ "$PAIR" == 1 ]]; then
    start_mock "$OUT_DIR/simulator-b.log" SIM_B_PID SIM_B_URL
    start_gateway "$PAIR_GATEWAY" "$PAIR_ADAPTERS" "$SIM_B_URL" "$TMP/data-b" "$TMP/gateway-b.toml" \
        "$OUT_DIR/gateway-b.log" GW_B_PID GW_B_URL GATEWAY_B_ADMIN_URL TOKEN_B
    say "pair: A $GATEWAY ($ROOT/build/adapters) at $GW_URL; B $PAIR_GATEWAY ($PAIR_ADAPTERS) at $GW_B_URL"
    record "$(python3 "$REPORT" tag '{"label":"pair"}' a "${GATEWAY#"$ROOT/"}" b "${PAIR_GATEWAY#"$ROOT/"}" \
        a_adapters build/adapters b_adapters "${PAIR_ADAPTERS#"$ROOT/"}")"
    for round in $(seq "$ROUNDS"); do
        for c in $CONCURRENCY; do
            run_pair "pair-c$c-r$round" pair-gateway "$round" "$c" /v1/chat/completions gpt-4o-mini
            if [[ "$CROSS" == 1 ]]; then
                run_pair "pair-cross-c$c-r$round" pair-cross "$round" "$c" /v1/messages gpt-4o-mini \
                    --protocol anthropic-messages
            fi
        done
        if [[ "$STREAM" == 1 ]]; then
            run_pair "pair-stream-r$round" pair-stream "$round" "$STREAM_CONCURRENCY" /v1/chat/completions \
                gpt-4o-mini "${STREAM_ARGS[@]}"
        fi
    done
    python3 "$REPORT" print "$OUT"
    say "raw results: ${OUT#"$ROOT/"}; logs: ${OUT_DIR#"$ROOT/"}/{simulator,gateway}{,-b}.log"
    if ((FAILED)); then
        die "some runs failed or had errors (see above)"
    fi
    exit 0
fi

checkpoint
# Idle: read twice, right after start-up (the account, the token, the
# checkpoint just served) and IDLE_SETTLE seconds later, once the allocator
# has given back what start-up freed (jemalloc returns freed pages after a
# second: dirty_decay_ms in host/src/main.rs). The target is checked against
# the second reading.
RSS_STARTED=$(rss_kib "$GW_PID")
ANON_STARTED=$(rss_kib "$GW_PID" RssAnon)
sleep "$IDLE_SETTLE"
RSS_IDLE=$(rss_kib "$GW_PID")
ANON_IDLE=$(rss_kib "$GW_PID" RssAnon)
if [[ "$IDLE_ONLY" == 1 ]]; then
    say "idle VmRSS $RSS_IDLE KiB (RssAnon $ANON_IDLE KiB); right after start-up $RSS_STARTED KiB (RssAnon $ANON_STARTED KiB)"
    exit 0
fi
read -r DATA_BEFORE WAL_BEFORE _ <<<"$(data_bytes)"

# A run's label names its round when there are several (its log lines and
# temp files); the report groups runs by cell and concurrency.
round_suffix() {
    if ((ROUNDS > 1)); then
        printf -- '-r%s' "$1"
    fi
}

for round in $(seq "$ROUNDS"); do
    r=$(round_suffix "$round")
    for c in $CONCURRENCY; do
        run "direct-c$c$r" direct "$c" "$SIM_URL/v1/chat/completions" "$SIM_KEY" sim-chat "$SIM_PID"
        if [[ -n "$NGINX_URL" ]]; then
            run "nginx-c$c$r" nginx "$c" "$NGINX_URL/v1/chat/completions" "$SIM_KEY" sim-chat "$NGINX_PIDS"
        fi
        run "gateway-c$c$r" gateway "$c" "$GW_URL/v1/chat/completions" "$TOKEN" gpt-4o-mini "$GW_PID"
        # The cross-protocol cell: an Anthropic client, the OpenAI vendor
        # (request, answer and usage translated through the canonical form).
        if [[ "$CROSS" == 1 ]]; then
            run "cross-c$c$r" cross "$c" "$GW_URL/v1/messages" "$TOKEN" gpt-4o-mini "$GW_PID" \
                --protocol anthropic-messages
        fi
    done
done

# Durable storage of the non-streamed gateway calls above.
checkpoint
read -r DATA_AFTER WAL_AFTER _ <<<"$(data_bytes)"
record "{\"label\":\"storage\",\"bytes_before\":$DATA_BEFORE,\"bytes_after\":$DATA_AFTER,\"wal_before\":$WAL_BEFORE,\"wal_after\":$WAL_AFTER}"

if [[ "$STREAM" == 1 ]]; then
    for round in $(seq "$ROUNDS"); do
        r=$(round_suffix "$round")
        run "direct-stream$r" direct-stream "$STREAM_CONCURRENCY" "$SIM_URL/v1/chat/completions" "$SIM_KEY" \
            sim-chat "$SIM_PID" "${STREAM_ARGS[@]}"
        if [[ -n "$NGINX_URL" ]]; then
            run "nginx-stream$r" nginx-stream "$STREAM_CONCURRENCY" "$NGINX_URL/stream/v1/chat/completions" \
                "$SIM_KEY" sim-chat "$NGINX_PIDS" "${STREAM_ARGS[@]}"
        fi
        run "gateway-stream$r" gateway-stream "$STREAM_CONCURRENCY" "$GW_URL/v1/chat/completions" "$TOKEN" \
            gpt-4o-mini "$GW_PID" "${STREAM_ARGS[@]}"
    done
fi

RSS_LOADED=$(rss_kib "$GW_PID")
ANON_LOADED=$(rss_kib "$GW_PID" RssAnon)
if ((QUIET > 0)); then
    say "${QUIET}s without load ..."
    sleep "$QUIET"
fi
RSS_QUIET=$(rss_kib "$GW_PID")
ANON_QUIET=$(rss_kib "$GW_PID" RssAnon)
record "{\"label\":\"memory\",\"rss_started_kib\":$RSS_STARTED,\"anon_started_kib\":$ANON_STARTED,\"idle_settle_s\":$IDLE_SETTLE,\"rss_idle_kib\":$RSS_IDLE,\"rss_after_load_kib\":$RSS_LOADED,\"rss_after_quiet_kib\":$RSS_QUIET,\"anon_idle_kib\":$ANON_IDLE,\"anon_after_load_kib\":$ANON_LOADED,\"anon_after_quiet_kib\":$ANON_QUIET,\"quiet_s\":$QUIET}"

if ((SOAK > 0)); then
    say "soak: ${SOAK}s at $SOAK_CONCURRENCY connections through the gateway, memory every ${SOAK_EVERY}s ..."
    RUN_DURATION=$SOAK RUN_WARMUP=0 SAMPLE_EVERY=$SOAK_EVERY \
        run "soak-c$SOAK_CONCURRENCY" soak "$SOAK_CONCURRENCY" "$GW_URL/v1/chat/completions" "$TOKEN" \
        gpt-4o-mini "$GW_PID"
    samples=""
    for s in $RSS_SAMPLES; do
        samples+="${samples:+,}[${s//:/,}]"
    done
    record "{\"label\":\"soak-memory\",\"every_s\":$SOAK_EVERY,\"samples\":[$samples]}"
fi

# --- report ----------------------------------------------------------------------

python3 "$REPORT" print "$OUT"
say "raw results: ${OUT#"$ROOT/"}; logs: ${OUT_DIR#"$ROOT/"}/{simulator,gateway${NGINX_URL:+,nginx}}.log"
if ((FAILED)); then
    die "some runs failed or had errors (see above)"
fi
