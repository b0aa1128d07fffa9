# The two commands a new user needs:
#   make demo   build, start the upstream simulator and the gateway, print examples
#   make test   every test: Rust unit + end-to-end, and the Python SDK suite
#
# Other targets: build, dist, bench-tools, adapters, run, fuzz, bench, bench-store, fmt, lint, clean.

CARGO       ?= cargo
PYTHON      ?= python3
WASM_TARGET := wasm32-wasip2
PORT        ?= 8080
BUILD       := build
RELEASE     := target/release
# Cargo.toml's profile for guest components, and where cargo puts them.
GUEST_PROFILE := guest
WASM_OUT    := target/$(WASM_TARGET)/$(GUEST_PROFILE)

# guest crate -> file name in the plugin folders
ADAPTERS    := openai-adapter:openai anthropic-adapter:anthropic gemini-adapter:gemini rerank-adapter:rerank genvideo-adapter:genvideo
POLICIES    := drop-sampling-policy:drop-sampling keep-thinking-policy:keep-thinking
TEST_GUESTS := misbehave-guest:misbehave old-contract-guest:old-contract
# Starting points for adapter authors (built and tested, not loaded by the demo).
EXAMPLES    := template-adapter:template

crate = $(word 1,$(subst :, ,$(1)))
fname = $(word 2,$(subst :, ,$(1)))
pkgs  = $(foreach g,$(1),-p $(call crate,$(g)))

.PHONY: build host dist bench-tools adapters wasm-target run demo test test-rust test-adapters test-sdk console-screenshots fuzz bench bench-store fmt lint clean venv

build: host adapters

host:
	$(CARGO) build --release -p gateway -p upstream-sim -p loadgen

# The gateway built to run in production: Cargo.toml's `dist` profile (whole-
# program optimisation) guided by a profile of the bench's load (PGO):
# target/pgo/gateway. Slow: two builds of about 13 minutes each from clean and
# a training run of about a minute (tests/bench/pgo.sh says how).
dist: adapters bench-tools
	CARGO=$(CARGO) tests/bench/pgo.sh

# The simulator and the load generator, which the bench and the training run use.
bench-tools:
	$(CARGO) build --release -p upstream-sim -p loadgen

wasm-target:
	@rustup target list --installed | grep -qx $(WASM_TARGET) || rustup target add $(WASM_TARGET)

# Every guest component, copied into the folders the gateway loads from.
adapters: wasm-target
	$(CARGO) build --profile $(GUEST_PROFILE) --target $(WASM_TARGET) $(call pkgs,$(ADAPTERS) $(POLICIES) $(TEST_GUESTS) $(EXAMPLES))
	@mkdir -p $(BUILD)/adapters $(BUILD)/policies $(BUILD)/test-guests $(BUILD)/examples
	@$(foreach g,$(ADAPTERS),cp $(WASM_OUT)/$(subst -,_,$(call crate,$(g))).wasm $(BUILD)/adapters/$(call fname,$(g)).wasm;)
	@$(foreach g,$(POLICIES),cp $(WASM_OUT)/$(subst -,_,$(call crate,$(g))).wasm $(BUILD)/policies/$(call fname,$(g)).wasm;)
	@$(foreach g,$(TEST_GUESTS),cp $(WASM_OUT)/$(subst -,_,$(call crate,$(g))).wasm $(BUILD)/test-guests/$(call fname,$(g)).wasm;)
	@$(foreach g,$(EXAMPLES),cp $(WASM_OUT)/$(subst -,_,$(call crate,$(g))).wasm $(BUILD)/examples/$(call fname,$(g)).wasm;)
	@ls -l $(BUILD)/adapters $(BUILD)/policies $(BUILD)/test-guests $(BUILD)/examples | grep wasm

# The gateway alone, with your own config (default gateway.toml).
run: build
	$(RELEASE)/gateway serve --config $${GATEWAY_CONFIG:-gateway.toml}

# The main job on a fresh machine: simulator + gateway + a demo token.
demo: build
	PORT=$(PORT) tests/demo/run.sh

venv: .venv/.installed
.venv/.installed: tests/sdk/requirements.txt
	$(PYTHON) -m venv .venv
	.venv/bin/pip install --quiet -r tests/sdk/requirements.txt
	touch $@

test: build test-rust test-adapters test-sdk

# Every adapter against its recorded fixtures (`gateway adapter test`).
FIXTURED := $(BUILD)/adapters/openai:adapters/openai $(BUILD)/adapters/anthropic:adapters/anthropic \
            $(BUILD)/adapters/gemini:adapters/gemini $(BUILD)/adapters/rerank:adapters/rerank \
            $(BUILD)/adapters/genvideo:adapters/genvideo $(BUILD)/examples/template:adapters/template
test-adapters: build
	@set -e; $(foreach f,$(FIXTURED),$(RELEASE)/gateway adapter test $(word 1,$(subst :, ,$(f))).wasm $(word 2,$(subst :, ,$(f)))/fixtures;)

test-rust: build
	$(CARGO) test --release --workspace

# The SDK suites, and the web console in headless Chromium (chromium and
# chromium-driver from Debian's packages; .ci/run installs them); also the
# unit tests of the bench's Python helpers (tests/bench).
test-sdk: build venv
	.venv/bin/python -m pytest -q tests/sdk tests/bench

# The console's screenshots in docs/console (the README's), from its browser test.
console-screenshots: build venv
	CONSOLE_SCREENSHOTS=$(CURDIR)/docs/console .venv/bin/python -m pytest -q tests/sdk/test_console_browser.py

# The mock direct, through a keep-alive nginx hop (installed from Debian's
# packages if absent) and through the gateway (`make dist`'s build): req/s, latency, CPU per request,
# memory, storage per call, a streamed test, and issue 13's targets. Knobs
# (BENCH_DURATION, BENCH_WARMUP, BENCH_CONCURRENCY, BENCH_CROSS, BENCH_NGINX,
# BENCH_STREAM, BENCH_STREAM_CONCURRENCY, BENCH_QUIET, BENCH_SOAK, BENCH_ROUNDS,
# BENCH_GATEWAY, BENCH_OUT_DIR) are described at the top of tests/bench/run.sh.
bench: dist
	tests/bench/run.sh

# The property-based fuzz tests (host/src/fuzz.rs) with 100,000 cases each
# instead of make test's few hundred.
fuzz:
	PROPTEST_CASES=$${PROPTEST_CASES:-100000} $(CARGO) test --release -p gateway --lib fuzz

# A dated usage query against 100,000 usage rows, through the index and by
# a full scan.
bench-store:
	$(CARGO) bench -p gateway --bench usage_query

fmt:
	$(CARGO) fmt --all

lint:
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy --workspace --all-targets -- -D warnings
	$(CARGO) clippy --target $(WASM_TARGET) $(call pkgs,$(ADAPTERS) $(POLICIES) $(TEST_GUESTS) $(EXAMPLES)) -- -D warnings

clean:
	$(CARGO) clean
	rm -rf $(BUILD) .venv .demo
