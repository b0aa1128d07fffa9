#!/usr/bin/env bash
# `make dist`: the gateway to run in production, target/pgo/gateway.
#
# Cargo's `dist` profile (the release profile with fat LTO and one
# code-generation unit) plus profile-guided optimisation: the compiler lays
# out and inlines the code by how a real load runs it, not by guesses. Three
# steps, each skipped when its inputs have not changed:
#
#   1. an instrumented build (`-Cprofile-generate`) in target/pgo/gen;
#   2. a training run: the bench (tests/bench/run.sh, short runs, no nginx)
#      against that build, which writes its counters when it exits; the
#      counters merged by llvm-profdata into target/pgo/merged.profdata. Done
#      again only when the instrumented binary changed (its SHA-256 is kept in
#      target/pgo/trained-on);
#   3. the optimised build (`-Cprofile-use`) in target/pgo/use, copied to
#      target/pgo/gateway.
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
if [[ -s "$PGO/merged.profdata" && "$(cat "$PGO/trained-on" 2>/dev/null || true)" == "$sum" ]]; then
    say "2/3: the instrumented build is unchanged: keeping target/pgo/merged.profdata"
else
    say "2/3: training: the bench's load against the instrumented build (about a minute; log: target/pgo/training.log)"
    rm -rf "$PGO/raw" "$PGO/trained-on"
    if ! BENCH_GATEWAY="$GEN" BENCH_OUT_DIR="$PGO/training" BENCH_DURATION=5 BENCH_WARMUP=1 \
        BENCH_CONCURRENCY="1 32" BENCH_ROUNDS=1 BENCH_NGINX=0 BENCH_CROSS=1 BENCH_STREAM=1 \
        BENCH_QUIET=1 BENCH_SOAK=0 "$ROOT/tests/bench/run.sh" >"$PGO/training.log" 2>&1; then
        tail -n 20 "$PGO/training.log" | sed 's/^/    /' >&2
        die "the training run failed (log: target/pgo/training.log)"
    fi
    shopt -s nullglob
    raw=("$PGO"/raw/*.profraw)
    shopt -u nullglob
    ((${#raw[@]} > 0)) || die "the training run left no counters in target/pgo/raw (did the gateway exit cleanly?)"
    "$PROFDATA" merge -o "$PGO/merged.profdata.new" "${raw[@]}"
    mv "$PGO/merged.profdata.new" "$PGO/merged.profdata"
    printf '%s\n' "$sum" >"$PGO/trained-on"
fi

# 3. The optimised build.
say "3/3: the optimised build (target/pgo/use)"
RUSTFLAGS="-Cprofile-use=$PGO/merged.profdata" \
    "$CARGO" build --profile dist -p gateway --target "$TRIPLE" --target-dir "$PGO/use"
cp -f "$PGO/use/$TRIPLE/dist/gateway" "$PGO/gateway.new"
mv -f "$PGO/gateway.new" "$PGO/gateway"
say "built target/pgo/gateway"
