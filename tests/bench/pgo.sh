#!/usr/bin/env bash
# `make dist`: the gateway to run in production, target/pgo/gateway.
#
# Cargo's `dist` profile (the release profile with fat LTO and one
# code-generation unit) plus profile-guided optimisation: the compiler lays
# out and inlines the code by how a real load runs it, not by guesses. Three
# steps, each skipped when its inputs have not changed:
#
#   1. an instrumented build (`-Cprofile-generate`) in target/pgo/gen;
#   2. two training runs against that build, the bench's set-up alone
#      (tests/bench/run.sh with BENCH_IDLE_ONLY=1: a gateway that starts and
#      idles) and the bench's load (short runs, no nginx), whose processes
#      (the server, the compiler processes it starts, the admin commands)
#      each write their counters when they exit; the load's counters merged
#      by llvm-profdata into target/pgo/merged.profdata, and the functions
#      the server processes ran listed in target/pgo/order.txt, start-up's
#      first, hottest first in each group (tests/bench/symbol_order.py).
#      Done again only when the instrumented binary changed (its SHA-256 is
#      kept in target/pgo/trained-on);
#   3. the optimised build (`-Cprofile-use`) in target/pgo/use, linked with
#      order.txt as lld's `--symbol-ordering-file`, so that the code the
#      server runs sits together at the start of the binary's code (the
#      kernel maps code in whole page-cache folios, so scattered code keeps
#      far more of the binary resident), and its relocations packed; copied
#      to target/pgo/gateway.
#
# Both builds pass `--target` (the host's), so RUSTFLAGS reach only the
# gateway's own code and its dependencies, not build scripts or proc macros.
# llvm-profdata must match rustc's LLVM: it comes from rustup's `llvm-tools`
# component, added here when missing. The training needs the release builds
# of upstream-sim and loadgen and the adapters (make's `dist` target builds
# them first).
#
# Slow: each build is about 13 minutes from clean on 2 cores, the training
# about a minute. Any RUSTFLAGS of the caller are replaced.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
CARGO="${CARGO:-cargo}"
PGO="$ROOT/target/pgo"

say() { printf 'pgo: %s\n' "$*" >&2; }
die() {
    say "error: $*"
    exit 1
}

TRIPLE=$(rustc -vV | sed -n 's/^host: //p')
[[ -n "$TRIPLE" ]] || die "cannot read the host triple from rustc -vV"
PROFDATA="$(rustc --print sysroot)/lib/rustlib/$TRIPLE/bin/llvm-profdata"
if [[ ! -x "$PROFDATA" ]]; then
    say "llvm-profdata is missing: rustup component add llvm-tools"
    rustup component add llvm-tools >&2 || die "could not add rustup's llvm-tools component"
    [[ -x "$PROFDATA" ]] || die "$PROFDATA is still missing after adding llvm-tools"
fi
unset CARGO_ENCODED_RUSTFLAGS

# 1. The instrumented build.
say "1/3: the instrumented build (target/pgo/gen)"
RUSTFLAGS="-Cprofile-generate=$PGO/raw" \
    "$CARGO" build --profile dist -p gateway --target "$TRIPLE" --target-dir "$PGO/gen"
GEN="$PGO/gen/$TRIPLE/dist/gateway"
[[ -x "$GEN" ]] || die "the instrumented build did not produce $GEN"

# 2. The training run, unless this very binary was trained already.
sum=$(sha256sum "$GEN" | cut -d' ' -f1)
if [[ -s "$PGO/merged.profdata" && -s "$PGO/order.txt" &&
    "$(cat "$PGO/trained-on" 2>/dev/null || true)" == "$sum" ]]; then
    say "2/3: the instrumented build is unchanged: keeping target/pgo/merged.profdata and order.txt"
else
    say "2/3: training: the bench's start-up, then its load, against the instrumented build (about a minute; log: target/pgo/training.log)"
    rm -rf "$PGO/raw" "$PGO/raw-startup" "$PGO/trained-on" "$PGO/order.txt"
    : >"$PGO/training.log"
    # One counters file per process (%p), so that the server's can be told
    # from the compiler processes' and the admin commands'.
    train() {
        LLVM_PROFILE_FILE="$1/gateway-%p.profraw" BENCH_GATEWAY="$GEN" \
            BENCH_OUT_DIR="$PGO/training" BENCH_DURATION=5 BENCH_WARMUP=1 \
            BENCH_CONCURRENCY="1 32" BENCH_ROUNDS=1 BENCH_NGINX=0 BENCH_CROSS=1 BENCH_STREAM=1 \
            BENCH_QUIET=1 BENCH_SOAK=0 BENCH_IDLE_ONLY="$2" "$ROOT/tests/bench/run.sh" >>"$PGO/training.log" 2>&1
    }
    if ! train "$PGO/raw-startup" 1 || ! train "$PGO/raw" 0; then
        tail -n 20 "$PGO/training.log" | sed 's/^/    /' >&2
        die "the training run failed (log: target/pgo/training.log)"
    fi
    shopt -s nullglob
    raw=("$PGO"/raw/*.profraw)
    startup=("$PGO"/raw-startup/*.profraw)
    shopt -u nullglob
    ((${#raw[@]} > 0 && ${#startup[@]} > 0)) ||
        die "the training left no counters in target/pgo/raw or raw-startup (did the gateway exit cleanly?)"
    "$PROFDATA" merge -o "$PGO/merged.profdata.new" "${raw[@]}"
    # symbol_order.py reads the counters as text.
    for r in "${startup[@]}" "${raw[@]}"; do
        "$PROFDATA" merge --text -o "${r%.profraw}.txt" "$r"
    done
    startup_text=("${startup[@]/%.profraw/.txt}")
    load_text=("${raw[@]/%.profraw/.txt}")
    python3 "$ROOT/tests/bench/symbol_order.py" --startup "${startup_text[@]}" \
        --load "${load_text[@]}" >"$PGO/order.txt.new" ||
        die "could not list the functions the server ran"
    mv "$PGO/order.txt.new" "$PGO/order.txt"
    mv "$PGO/merged.profdata.new" "$PGO/merged.profdata"
    printf '%s\n' "$sum" >"$PGO/trained-on"
fi

# 3. The optimised build, linked for a small resident set:
#  - the functions in order.txt first (lld's `--symbol-ordering-file`; rustc
#    links with lld, rust-lld, on this platform since Rust 1.90, and the
#    instrumented build says which linker it had);
#  - relative relocations packed (`-z pack-relative-relocs`, DT_RELR): the
#    dynamic loader reads some 12 KB of them at start instead of a 1 MB
#    table. The binary then needs glibc 2.36 or later, so only where the
#    build machine's glibc has it.
link_args=()
if grep -aq 'Linker: LLD' "$GEN"; then
    link_args+=(-Clink-arg=-Wl,--symbol-ordering-file="$PGO/order.txt"
        -Clink-arg=-Wl,--no-warn-symbol-ordering)
    glibc=$(getconf GNU_LIBC_VERSION 2>/dev/null | sed -n 's/^glibc //p')
    if [[ -n "$glibc" ]] && printf '2.36\n%s\n' "$glibc" | sort -CV; then
        link_args+=(-Clink-arg=-Wl,-z,pack-relative-relocs)
    else
        say "glibc ${glibc:-unknown} predates DT_RELR (2.36): relocations left unpacked"
    fi
else
    say "the linker is not lld: the code is not laid out by target/pgo/order.txt"
fi
say "3/3: the optimised build (target/pgo/use)"
RUSTFLAGS="-Cprofile-use=$PGO/merged.profdata ${link_args[*]}" \
    "$CARGO" build --profile dist -p gateway --target "$TRIPLE" --target-dir "$PGO/use"
cp -f "$PGO/use/$TRIPLE/dist/gateway" "$PGO/gateway.new"
mv -f "$PGO/gateway.new" "$PGO/gateway"
say "built target/pgo/gateway"
