//! The sandbox every guest runs in: one wasmtime engine, one linker that
//! grants nothing but the log import and a deny-all WASI, and per-call CPU
//! and memory bounds.
//!
//! Tuning knobs (all from `[plugins]` in the config):
//! - `epoch_tick_ms` (10): how often a ticker thread bumps the engine epoch
//!   while a guest call is in flight. Guests check the epoch at loop heads
//!   and function entries; at each tick a running guest yields to the async
//!   executor, so a busy guest never holds a runtime thread for longer than
//!   one tick. With no call in flight the ticker sleeps until one begins
//!   ([`Ticker`]): an idle gateway, or one relaying streams between their
//!   guest calls, is not woken a hundred times a second for nothing.
//! - `call_timeout_ms` (200): the wall-clock budget of one guest call. When
//!   it has used `call_timeout / epoch_tick` ticks the call traps with an
//!   interrupt. A tokio timeout of twice the budget backs this up for guests
//!   stuck somewhere epochs are not checked (long bulk memory operations).
//! - `max_memory_mib` (64): the most linear memory a store may have; growth
//!   beyond it fails, which a Rust guest turns into an abort (a trap).
//! - `max_instances` (1000): the size of the pooling allocator, i.e. how many
//!   guest instances (requests and streams in flight) may exist at once.
//!   Each reserves virtual address space (not memory) up front, so tests
//!   keep it small.
//! - `warm_instances` (4): idle instances kept per component between calls
//!   ([`Warm`]), so most calls skip instantiation. Never more than
//!   `max_instances / 16` per component, so idle instances cannot starve
//!   calls of slots.

use super::bindings::adapter::gateway::plugin::{log, types};
use crate::clock::SharedClock;
use crate::config::{PluginCompiler, PluginConfig};
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;
use wasmtime::component::{HasSelf, Linker, ResourceTable};
use wasmtime::{
    Engine, InstanceAllocationStrategy, PoolingAllocationConfig, Store, UpdateDeadline,
};
use wasmtime_wasi::{WasiCtx, WasiCtxView, WasiView};

/// Most log lines one guest store may write; beyond it lines are dropped, so
/// a chatty guest cannot flood the host's log.
const MAX_LOG_LINES: u32 = 64;
/// Longest guest log line kept.
const MAX_LOG_LINE: usize = 2048;

/// Why a guest call did not produce a usable answer.
#[derive(Debug, thiserror::Error)]
pub enum GuestFailure {
    #[error("{plugin} exceeded its CPU deadline of {budget_ms} ms")]
    Deadline { plugin: String, budget_ms: u64 },
    #[error("{plugin} exceeded its memory limit of {limit_mib} MiB")]
    Memory { plugin: String, limit_mib: usize },
    #[error("{plugin} trapped: {detail}")]
    Trap { plugin: String, detail: String },
    #[error("{plugin} returned an invalid answer: {detail}")]
    Invalid { plugin: String, detail: String },
    /// A component that passed its load could not be mapped again from the
    /// plugin cache when first called (see `registry::Linked`).
    #[error("{plugin} could not be loaded: {detail}")]
    Unloadable { plugin: String, detail: String },
    #[error("no guest instance available (all {0} in use); retry shortly")]
    Capacity(u32),
}

/// An instance whose linear memory grew past this is not kept warm: it
/// would hold that memory while idle.
const WARM_MAX_MEMORY: usize = 4 * 1024 * 1024;

/// Per-store memory accounting that remembers whether it refused growth, so a
/// resulting trap can be reported as "out of memory" rather than a crash.
pub struct MemoryLimiter {
    limit: usize,
    pub(crate) hit: bool,
    /// The largest linear memory granted so far.
    largest: usize,
}

impl wasmtime::ResourceLimiter for MemoryLimiter {
    fn memory_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        if desired > self.limit {
            self.hit = true;
            return Ok(false);
        }
        self.largest = self.largest.max(desired);
        Ok(true)
    }

    fn table_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        Ok(desired <= 100_000)
    }
}

/// What a guest's store holds.
pub struct GuestState {
    wasi: WasiCtx,
    table: ResourceTable,
    pub(crate) limiter: MemoryLimiter,
    /// Epoch ticks the current call may still use before it is interrupted.
    ticks_left: u64,
    pub(crate) plugin: Arc<str>,
    request_id: String,
    log_lines: u32,
    /// This plugin's series of `gateway_guest_call_duration_seconds`,
    /// looked up at the store's first timed call: a stream calls its guest
    /// once per relayed frame, and finding the series by name and label
    /// each time (a label allocated, the registry hashed) was a visible
    /// part of a frame.
    call_time: Option<metrics::Histogram>,
}

impl WasiView for GuestState {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView {
            ctx: &mut self.wasi,
            table: &mut self.table,
        }
    }
}

impl types::Host for GuestState {}

impl log::Host for GuestState {
    fn log(&mut self, level: log::Level, message: String) {
        self.log_lines += 1;
        if self.log_lines > MAX_LOG_LINES {
            return;
        }
        let mut message = message;
        if message.len() > MAX_LOG_LINE {
            let mut cut = MAX_LOG_LINE;
            while !message.is_char_boundary(cut) {
                cut -= 1;
            }
            message.truncate(cut);
        }
        let (plugin, request_id) = (&*self.plugin, &self.request_id);
        match level {
            log::Level::Trace => tracing::trace!(plugin, request_id, "{message}"),
            log::Level::Debug => tracing::debug!(plugin, request_id, "{message}"),
            log::Level::Info => tracing::info!(plugin, request_id, "{message}"),
            log::Level::Warn => tracing::warn!(plugin, request_id, "{message}"),
            log::Level::Error => tracing::error!(plugin, request_id, "{message}"),
        }
    }
}

/// Every engine setting that shapes compiled code; [`Sandbox::new`] adds
/// the instance pool to it for running guests.
fn compile_config() -> wasmtime::Config {
    let mut cfg = wasmtime::Config::new();
    cfg.wasm_component_model(true);
    // The 0.2 contract is synchronous: no export is lifted async and no
    // import is a component-model future or stream. With concurrency
    // support on (wasmtime's default) every call would still go through
    // the concurrent task machinery (a task record, a waitable set) instead
    // of straight onto the fiber; off, a component that does use those
    // features fails to compile, with wasmtime's message, when it loads.
    cfg.concurrency_support(false);
    cfg.epoch_interruption(true);
    cfg.max_wasm_stack(256 * 1024);
    cfg.async_stack_size(512 * 1024);
    cfg
}

/// Compiles components into native code the sandbox's engine loads, where
/// `PluginConfig::compiler` says (the `gateway` binary: a child process).
///
/// Never on the sandbox's own engine: Cranelift keeps its working buffers
/// in the engine that compiled, for reuse, as long as that engine lives
/// (compiling the demo's seven components on the sandbox's engine left
/// about 17 MiB of them resident for the life of the process). Nothing
/// about running guests differs between the engines except how instances
/// are allocated, which is not part of compiled code.
///
/// A throwaway engine in the server still leaves its mark: the compiler's
/// code (several MiB of the binary) stays mapped once it has run, and the
/// allocator keeps some of the heap it grew. A bench start, which compiles
/// every component, left the server 7.5 MiB larger when idle than a start
/// from a warm cache (30.7 against 23.2 MiB). A child process takes all of
/// that with it when it exits, and a compiler crash or an out-of-memory
/// kill is a refused component there, not a dead gateway.
pub struct Compiler(PluginCompiler);

impl Compiler {
    /// Compiles `bytes` (a component) into the file `out`.
    pub fn compile(self, bytes: &[u8], out: &Path) -> anyhow::Result<()> {
        match self.0 {
            PluginCompiler::InProcess => compile_component(bytes, out),
            PluginCompiler::Child(program) => match compile_in_child(&program, bytes, out) {
                Err(ChildFailed::NotStarted(e)) => {
                    // No `/proc` in a bare container, say: compiling here
                    // costs memory, refusing every component would cost
                    // the service.
                    tracing::warn!(
                        "cannot start the compiler process {} ({e}); compiling in-process",
                        program.display()
                    );
                    compile_component(bytes, out)
                }
                Err(ChildFailed::Failed(e)) => Err(e),
                Ok(()) => Ok(()),
            },
        }
    }
}

/// The `compile-component` command's work (and the in-process compiler's):
/// compiles `bytes` with the sandbox's code settings into the file `out`.
pub fn compile_component(bytes: &[u8], out: &Path) -> anyhow::Result<()> {
    let native = Engine::new(&compile_config())?.precompile_component(bytes)?;
    std::fs::write(out, native)?;
    Ok(())
}

/// Why a child compiler produced nothing.
enum ChildFailed {
    /// The program could not be started.
    NotStarted(std::io::Error),
    /// It ran and failed (its message), or was killed.
    Failed(anyhow::Error),
}

/// Runs `program compile-component --out OUT` with the component on its
/// standard input; its standard error, when it fails, is the reason.
fn compile_in_child(program: &Path, bytes: &[u8], out: &Path) -> Result<(), ChildFailed> {
    use std::io::Write;
    use std::process::{Command, Stdio};
    let mut child = Command::new(program)
        .arg("compile-component")
        .arg("--out")
        .arg(out)
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(ChildFailed::NotStarted)?;
    // Fed from another thread while this one drains its standard error, so
    // neither pipe can fill up and stall the other. A child that dies
    // before reading it all breaks the pipe; its exit status and message
    // below say why.
    let stdin = child.stdin.take();
    let (fed, done) = std::thread::scope(|scope| {
        let feeder = scope.spawn(move || match stdin {
            Some(mut stdin) => stdin.write_all(bytes),
            None => Ok(()),
        });
        let done = child.wait_with_output();
        (feeder.join(), done)
    });
    let fed = fed.unwrap_or_else(|panic| std::panic::resume_unwind(panic));
    let done = done
        .map_err(|e| ChildFailed::Failed(anyhow::anyhow!("the compiler process was lost: {e}")))?;
    if done.status.success() {
        return fed.map_err(|e| {
            ChildFailed::Failed(anyhow::anyhow!(
                "the compiler process did not read the component: {e}"
            ))
        });
    }
    let said = String::from_utf8_lossy(&done.stderr);
    let said = said.trim();
    let said = said.strip_prefix("error: ").unwrap_or(said);
    Err(ChildFailed::Failed(if said.is_empty() {
        anyhow::anyhow!("the compiler process failed ({})", done.status)
    } else {
        anyhow::anyhow!("{said}")
    }))
}

/// Guests read the gateway's clock (WASI's wall clock), so time is injected
/// for them too: a manual clock in tests, a fixed one in the adapter kit.
struct GuestClock(SharedClock);

impl wasmtime_wasi::HostWallClock for GuestClock {
    fn resolution(&self) -> Duration {
        Duration::from_millis(1)
    }

    fn now(&self) -> Duration {
        Duration::from_millis(self.0.now_ms().max(0) as u64)
    }
}

/// The engine, the linker and the limits; shared by every plugin.
pub struct Sandbox {
    pub(crate) engine: Engine,
    pub(crate) linker: Linker<GuestState>,
    clock: SharedClock,
    limits: PluginConfig,
    ticks_per_call: u64,
    ticker: Arc<Ticker>,
    /// Where guest call times go (`metrics`), once the server has set it.
    metrics: std::sync::OnceLock<crate::metrics::Metrics>,
}

impl Drop for Sandbox {
    fn drop(&mut self) {
        self.ticker.stop();
    }
}

impl Sandbox {
    pub fn new(limits: &PluginConfig, clock: SharedClock) -> anyhow::Result<Sandbox> {
        let mut cfg = compile_config();
        let instances = limits.max_instances;
        let mut pool = PoolingAllocationConfig::default();
        pool.total_component_instances(instances);
        // A Rust component is a handful of core instances (the program plus
        // the adapter shims wit-component adds), each with at most one
        // memory and a few tables.
        pool.total_core_instances(instances.saturating_mul(8));
        pool.total_memories(instances.saturating_mul(2));
        pool.total_tables(instances.saturating_mul(8));
        pool.total_stacks(instances);
        pool.max_memory_size(limits.max_memory_bytes);
        // When an instance ends, its slot's pages (linear memory, tables,
        // the fiber stack its calls ran on) go back to the OS at once
        // (madvise), rather than being reset with memset and kept resident.
        // Keeping them saved a little CPU only where instances end often,
        // which warm instances make rare (a guest call is short, so few are
        // in use at once outside streams), and it kept the pages of every
        // slot a burst had used for good (some 380 KiB a slot): private
        // memory grew by about 22 MiB over 32 connections and 32 streams at
        // once, against 7 MiB now.
        //
        // At once, not in batches: a slot keeps the memory image of the
        // component it last ran, and with it that component's whole native
        // code, until the slot is reused or the component is dropped; a
        // dropped component clears only the slots back in the free list,
        // so a slot still waiting in a batch would keep a dropped
        // component's code mapped (a component is let go after its load,
        // `registry::Linked`, and on every reload). A stream's instance
        // ending costs one more madvise of its pages, some microseconds.
        pool.decommit_batch_size(1);
        cfg.allocation_strategy(InstanceAllocationStrategy::Pooling(pool));
        let engine = Engine::new(&cfg)?;

        let mut linker = Linker::<GuestState>::new(&engine);
        // Deny-all WASI: what Rust's std links against, with no preopened
        // directories, no environment, no arguments and no network.
        wasmtime_wasi::p2::add_to_linker_async(&mut linker)?;
        log::add_to_linker::<GuestState, HasSelf<GuestState>>(&mut linker, |s| s)?;
        types::add_to_linker::<GuestState, HasSelf<GuestState>>(&mut linker, |s| s)?;

        let ticker = Ticker::spawn(engine.clone(), limits.epoch_tick)?;
        let ticks_per_call =
            (limits.call_timeout.as_millis() / limits.epoch_tick.as_millis().max(1)).max(1) as u64;
        Ok(Sandbox {
            engine,
            linker,
            clock,
            limits: limits.clone(),
            ticks_per_call,
            ticker,
            metrics: std::sync::OnceLock::new(),
        })
    }

    /// What compiles components for this sandbox (see [`Compiler`]).
    pub fn compiler(&self) -> Compiler {
        Compiler(self.limits.compiler.clone())
    }

    /// Counts guest call times in `metrics` from now on (set once).
    pub fn observe(&self, metrics: crate::metrics::Metrics) {
        let _ = self.metrics.set(metrics);
    }

    /// Records one guest call's time (see [`guarded!`]).
    pub fn observed(&self, store: &mut Store<GuestState>, took: Duration) {
        let Some(m) = self.metrics.get() else {
            return;
        };
        let state = store.data_mut();
        state
            .call_time
            .get_or_insert_with(|| m.guest_call_time(&state.plugin))
            .record(took.as_secs_f64());
    }

    /// The metrics this sandbox records into, once set.
    pub fn metrics(&self) -> Option<&crate::metrics::Metrics> {
        self.metrics.get()
    }

    pub fn limits(&self) -> &PluginConfig {
        &self.limits
    }

    /// A fresh store for one request (or one stream).
    pub fn new_store(&self, plugin: Arc<str>, request_id: &str) -> Store<GuestState> {
        let state = GuestState {
            wasi: wasmtime_wasi::WasiCtxBuilder::new()
                .wall_clock(GuestClock(self.clock.clone()))
                .build(),
            table: ResourceTable::new(),
            limiter: MemoryLimiter {
                limit: self.limits.max_memory_bytes,
                hit: false,
                largest: 0,
            },
            ticks_left: 0,
            plugin,
            request_id: request_id.to_string(),
            log_lines: 0,
            call_time: None,
        };
        let mut store = Store::new(&self.engine, state);
        store.limiter(|s| &mut s.limiter);
        store.epoch_deadline_callback(|mut ctx| {
            let state = ctx.data_mut();
            if state.ticks_left == 0 {
                return Ok(UpdateDeadline::Interrupt);
            }
            state.ticks_left -= 1;
            Ok(UpdateDeadline::Yield(1))
        });
        store
    }

    /// How many idle instances each component keeps (see the module doc).
    pub fn warm_cap(&self) -> usize {
        (self.limits.warm_instances).min(self.limits.max_instances / 16) as usize
    }

    /// Gives the next guest call on `store` its full budget; the epoch
    /// ticks while the returned value lives (drop it when the call ends).
    pub fn arm(&self, store: &mut Store<GuestState>) -> InFlight<'_> {
        store.data_mut().ticks_left = self.ticks_per_call;
        store.set_epoch_deadline(1);
        self.ticker.begin()
    }

    /// The tokio backstop around one call.
    pub fn hard_timeout(&self) -> Duration {
        self.limits.call_timeout * 2 + Duration::from_millis(50)
    }

    /// Turns the outcome of one guest call (run under [`guarded!`]) into a
    /// [`GuestFailure`] for every way it can go wrong. After a failure the
    /// store must be dropped: its instance may be in any state.
    pub fn outcome<R>(
        &self,
        store: &Store<GuestState>,
        outcome: Result<wasmtime::Result<R>, tokio::time::error::Elapsed>,
    ) -> Result<R, GuestFailure> {
        // The plugin's name is copied only into a failure.
        let plugin = || store.data().plugin.to_string();
        match outcome {
            Ok(Ok(v)) => Ok(v),
            Err(_) => Err(GuestFailure::Deadline {
                plugin: plugin(),
                budget_ms: self.limits.call_timeout.as_millis() as u64,
            }),
            Ok(Err(e)) => Err(self.classify(plugin(), store.data().limiter.hit, e)),
        }
    }

    fn classify(&self, plugin: String, memory_hit: bool, e: wasmtime::Error) -> GuestFailure {
        if memory_hit {
            return GuestFailure::Memory {
                plugin,
                limit_mib: self.limits.max_memory_bytes / (1024 * 1024),
            };
        }
        if let Some(trap) = e.downcast_ref::<wasmtime::Trap>() {
            if *trap == wasmtime::Trap::Interrupt {
                return GuestFailure::Deadline {
                    plugin,
                    budget_ms: self.limits.call_timeout.as_millis() as u64,
                };
            }
            return GuestFailure::Trap {
                plugin,
                detail: trap.to_string(),
            };
        }
        let text = format!("{e:#}");
        if text.contains("concurrent") && text.contains("limit") {
            return GuestFailure::Capacity(self.limits.max_instances);
        }
        GuestFailure::Trap {
            plugin,
            detail: first_line(&text),
        }
    }
}

/// Idle instances of one component, kept between calls.
///
/// Reuse is safe for the components this host runs because a call's state
/// lives in the host (the `state` string, the stream translator resource)
/// and the guest SDK keeps nothing in globals; an instance is only ever
/// used by one call at a time. Only an instance whose every call succeeded
/// comes back (a trap, an interrupt or a refused answer drops it, as a
/// failed instance may be in any state), and only while its memory is
/// small ([`WARM_MAX_MEMORY`]). Linear memory is not wiped between calls:
/// a component that must not see one call's leftovers in the next should
/// run with `warm_instances = 0`.
pub struct Warm<I> {
    idle: std::sync::Mutex<Vec<(Store<GuestState>, I)>>,
    cap: usize,
}

impl<I> Warm<I> {
    pub fn new(cap: usize) -> Warm<I> {
        Warm {
            idle: std::sync::Mutex::new(Vec::with_capacity(cap)),
            cap,
        }
    }

    fn idle(&self) -> std::sync::MutexGuard<'_, Vec<(Store<GuestState>, I)>> {
        self.idle.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// An idle instance, made ready for the call `request_id`.
    pub fn take(&self, request_id: &str) -> Option<(Store<GuestState>, I)> {
        let (mut store, inst) = self.idle().pop()?;
        let state = store.data_mut();
        state.request_id.clear();
        state.request_id.push_str(request_id);
        state.log_lines = 0;
        Some((store, inst))
    }

    /// Keeps an instance whose calls all succeeded, if there is room.
    pub fn give(&self, store: Store<GuestState>, inst: I) {
        let state = store.data();
        if state.limiter.hit || state.limiter.largest > WARM_MAX_MEMORY {
            return;
        }
        let mut idle = self.idle();
        if idle.len() < self.cap {
            idle.push((store, inst));
        }
    }

    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.idle().len()
    }

    #[cfg(test)]
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

fn first_line(s: &str) -> String {
    s.lines().next().unwrap_or("").chars().take(300).collect()
}

/// The thread that bumps the engine's epoch every `tick`, while a guest call
/// is in flight; with none it parks until one begins.
///
/// Why: most of the time no guest runs (a call's guest work is tens of
/// microseconds, and a spliced stream calls its guest only at its start and
/// end), and a thread woken every 10 ms regardless was 100 wake-ups a second
/// on an idle gateway and about 2.5% of the gateway's CPU samples relaying 32
/// streams. No call's budget gets shorter: its deadline is the first tick
/// after it began, and the first tick after a park comes one whole `tick`
/// after the call that woke the ticker. `park`/`unpark` keep a token: a call
/// that begins between the ticker's look at the count and its park wakes it
/// all the same.
struct Ticker {
    engine: Engine,
    tick: Duration,
    /// Guest calls in flight ([`InFlight`]).
    calls: AtomicUsize,
    stop: AtomicBool,
    /// Epochs bumped, and parks begun, so far (what the tests watch).
    ticks: AtomicU64,
    parks: AtomicU64,
    /// The ticker thread, to wake (set before any call can begin).
    thread: OnceLock<std::thread::Thread>,
}

impl Ticker {
    fn spawn(engine: Engine, tick: Duration) -> anyhow::Result<Arc<Ticker>> {
        let ticker = Arc::new(Ticker {
            engine,
            tick,
            calls: AtomicUsize::new(0),
            stop: AtomicBool::new(false),
            ticks: AtomicU64::new(0),
            parks: AtomicU64::new(0),
            thread: OnceLock::new(),
        });
        let own = ticker.clone();
        let handle = std::thread::Builder::new()
            .name("wasm-epoch".into())
            .spawn(move || own.run())?;
        let _ = ticker.thread.set(handle.thread().clone());
        Ok(ticker)
    }

    fn run(&self) {
        while !self.stop.load(Ordering::SeqCst) {
            if self.calls.load(Ordering::SeqCst) == 0 {
                // Woken by the next call's `begin` (or by `stop`); a
                // spurious return just looks again.
                self.parks.fetch_add(1, Ordering::Relaxed);
                std::thread::park();
                continue;
            }
            std::thread::sleep(self.tick);
            self.engine.increment_epoch();
            self.ticks.fetch_add(1, Ordering::Relaxed);
        }
    }

    fn begin(&self) -> InFlight<'_> {
        if self.calls.fetch_add(1, Ordering::SeqCst) == 0 {
            self.wake();
        }
        InFlight(self)
    }

    fn stop(&self) {
        self.stop.store(true, Ordering::SeqCst);
        self.wake();
    }

    fn wake(&self) {
        if let Some(thread) = self.thread.get() {
            thread.unpark();
        }
    }
}

/// One guest call in flight (from [`Sandbox::arm`]): the epoch ticks while
/// any lives. Dropped when the call ends, or when the future running it is
/// dropped mid-call.
pub struct InFlight<'a>(&'a Ticker);

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.0.calls.fetch_sub(1, Ordering::SeqCst);
    }
}

/// Runs one guest call with its budget armed and the tokio backstop around
/// it: `guarded!(sandbox, store, bindings.call_x(&mut store, ...))`. The
/// call is timed (`gateway_guest_call_duration_seconds`) and, with tracing
/// on, is a `guest` span named after the export it calls.
macro_rules! guarded {
    ($sandbox:expr, $store:expr, $call:expr) => {{
        let in_flight = $sandbox.arm(&mut $store);
        let span = $crate::telemetry::span!(
            "guest",
            plugin = &*$store.data().plugin,
            call = $crate::plugins::sandbox::call_name(stringify!($call))
        );
        let started = std::time::Instant::now();
        let r = tracing::Instrument::instrument(
            tokio::time::timeout($sandbox.hard_timeout(), $call),
            span,
        )
        .await;
        drop(in_flight);
        $sandbox.observed(&mut $store, started.elapsed());
        $sandbox.outcome(&$store, r)
    }};
}

/// The export a [`guarded!`] call expression calls, for its span:
/// `translate_request` of `bindings.call_translate_request(&mut store, ..)`,
/// `instantiate` for an instantiation.
pub fn call_name(expr: &'static str) -> &'static str {
    if let Some(at) = expr.find("call_") {
        let rest = &expr[at + "call_".len()..];
        let end = rest
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .unwrap_or(rest.len());
        return &rest[..end];
    }
    if expr.contains("instantiate") {
        return "instantiate";
    }
    if expr.contains("resource_drop") {
        return "drop";
    }
    "call"
}
pub(crate) use guarded;

#[cfg(test)]
mod tests {
    use super::*;

    /// Waits (a bounded poll, at most 10 s) until `cond` holds.
    fn until(what: &str, cond: impl Fn() -> bool) {
        let give_up = std::time::Instant::now() + Duration::from_secs(10);
        while !cond() {
            assert!(std::time::Instant::now() < give_up, "never: {what}");
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    #[test]
    fn the_epoch_ticks_only_while_a_guest_call_is_in_flight() {
        let engine = Engine::new(&compile_config()).unwrap();
        let t = Ticker::spawn(engine, Duration::from_millis(1)).unwrap();
        let parks = |t: &Ticker| t.parks.load(Ordering::Relaxed);
        let ticks = |t: &Ticker| t.ticks.load(Ordering::Relaxed);
        // Idle from the start: parked, no tick.
        until("the idle ticker parks", || parks(&t) >= 1);
        assert_eq!(ticks(&t), 0);
        // Two calls at once: ticking; one ends, still ticking.
        let (a, b) = (t.begin(), t.begin());
        until("a call wakes the ticker", || ticks(&t) >= 2);
        drop(a);
        let now = ticks(&t);
        until("ticking on for the other call", || ticks(&t) > now);
        // The last ends: it parks again (after at most the tick it was in),
        // and the next call wakes it.
        let parked = parks(&t);
        drop(b);
        until("parked once no call is in flight", || parks(&t) > parked);
        let at_rest = ticks(&t);
        assert_eq!(t.calls.load(Ordering::SeqCst), 0);
        let c = t.begin();
        until("the next call wakes it", || ticks(&t) > at_rest);
        drop(c);
        t.stop();
    }

    fn sandbox(max_instances: u32, warm_instances: u32) -> Sandbox {
        let limits = PluginConfig {
            call_timeout: Duration::from_millis(200),
            max_memory_bytes: 64 * 1024 * 1024,
            epoch_tick: Duration::from_millis(10),
            max_instances,
            warm_instances,
            reload_interval: Duration::ZERO,
            compiler: crate::config::PluginCompiler::InProcess,
        };
        Sandbox::new(&limits, Arc::new(crate::clock::ManualClock::new(0))).unwrap()
    }

    /// A component with one exported function.
    const WAT: &str = r#"(component
        (core module $m (func (export "f") (result i32) i32.const 7))
        (core instance $i (instantiate $m))
        (func (export "f") (result u32) (canon lift (core func $i "f"))))"#;

    #[test]
    fn code_compiled_by_a_throwaway_compiler_loads_into_the_sandbox() {
        let sb = sandbox(64, 2);
        assert_eq!(
            crate::plugins::registry::engine_key(&Engine::new(&compile_config()).unwrap()),
            crate::plugins::registry::engine_key(&sb.engine),
            "the cache key would differ"
        );
        // Compiled by one engine and loaded by the other (which checks
        // every setting that shapes code).
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("f.cwasm");
        sb.compiler().compile(WAT.as_bytes(), &out).unwrap();
        // SAFETY: `out` was written just above by wasmtime itself.
        let component =
            unsafe { wasmtime::component::Component::deserialize_file(&sb.engine, &out) }.unwrap();
        assert_eq!(component.component_type().exports(&sb.engine).count(), 1);
    }

    /// A stand-in for the `gateway` program: a script run as
    /// `<script> compile-component --out OUT`.
    #[cfg(unix)]
    fn program(dir: &Path, body: &str) -> Compiler {
        use std::os::unix::fs::PermissionsExt;
        let path = dir.join("compiler.sh");
        std::fs::write(&path, format!("#!/bin/sh\n{body}\n")).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
        Compiler(PluginCompiler::Child(path))
    }

    #[cfg(unix)]
    #[test]
    fn a_child_compiler_reads_stdin_says_why_it_failed_and_a_missing_one_compiles_here() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("out");
        // Arguments as the `compile-component` command takes them; the
        // bytes as given.
        let echo = r#"[ "$1" = compile-component ] && [ "$2" = --out ] && cat > "$3""#;
        program(dir.path(), echo)
            .compile(b"component bytes", &out)
            .unwrap();
        assert_eq!(std::fs::read(&out).unwrap(), b"component bytes");

        let refuse =
            "cat > /dev/null; echo 'error: failed to parse WebAssembly module' >&2; exit 1";
        let e = program(dir.path(), refuse).compile(b"x", &out).unwrap_err();
        assert_eq!(e.to_string(), "failed to parse WebAssembly module");

        let killed = "kill -9 $$";
        let e = program(dir.path(), killed).compile(b"x", &out).unwrap_err();
        assert!(e.to_string().contains("signal: 9"), "{e}");

        // A program that cannot be started: compiled here instead.
        let gone = Compiler(PluginCompiler::Child(dir.path().join("missing")));
        gone.compile(WAT.as_bytes(), &out).unwrap();
        let sb = sandbox(64, 2);
        // SAFETY: `out` was written just above by wasmtime itself.
        unsafe { wasmtime::component::Component::deserialize_file(&sb.engine, &out) }.unwrap();
        // One that says much before it reads (more than a pipe holds):
        // neither side waits on the other for ever.
        let chatty = "head -c 200000 /dev/zero | tr '\\0' x >&2; cat > /dev/null; exit 1";
        let e = program(dir.path(), chatty)
            .compile(&[0; 1 << 20], &out)
            .unwrap_err();
        assert_eq!(e.to_string().len(), 200_000);
        // One that exits without reading what it was given.
        let e = program(dir.path(), "exit 0")
            .compile(&[0; 1 << 20], &out)
            .unwrap_err();
        assert!(e.to_string().contains("did not read the component"), "{e}");
    }

    #[test]
    fn idle_instances_never_take_more_than_a_sixteenth_of_the_slots() {
        assert_eq!(sandbox(1000, 4).warm_cap(), 4);
        assert_eq!(sandbox(32, 4).warm_cap(), 2);
        assert_eq!(sandbox(8, 4).warm_cap(), 0);
        assert_eq!(sandbox(1000, 0).warm_cap(), 0);
    }

    #[test]
    fn only_healthy_small_instances_are_kept_up_to_the_cap_and_come_back_ready() {
        let sb = sandbox(64, 2);
        let warm: Warm<u32> = Warm::new(sb.warm_cap());
        assert!(warm.take("req_1").is_none());

        let mut used = sb.new_store("p".into(), "req_1");
        used.data_mut().log_lines = 9;
        warm.give(used, 1);
        let mut trapped = sb.new_store("p".into(), "req_2");
        trapped.data_mut().limiter.hit = true;
        warm.give(trapped, 2);
        let mut grown = sb.new_store("p".into(), "req_3");
        grown.data_mut().limiter.largest = WARM_MAX_MEMORY + 1;
        warm.give(grown, 3);
        assert_eq!(warm.len(), 1, "out of memory or grown: dropped");

        warm.give(sb.new_store("p".into(), "req_4"), 4);
        warm.give(sb.new_store("p".into(), "req_5"), 5);
        assert_eq!(warm.len(), 2, "no more than the cap");

        let (store, inst) = warm.take("req_6").unwrap();
        assert_eq!(inst, 4);
        assert_eq!(store.data().request_id, "req_6");
        let (store, inst) = warm.take("req_7").unwrap();
        assert_eq!((inst, store.data().log_lines), (1, 0), "log budget renewed");
        assert!(warm.is_empty());
    }
}
