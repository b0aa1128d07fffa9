//! The `gateway` binary: `serve`, `check-config`, and `admin` (a client of the
//! loopback admin API; a running gateway owns its database file, so admin
//! commands go through it rather than opening the file).

use clap::{Parser, Subcommand};
use gateway::admin_cli::{self, AdminArgs};
use gateway::config::{Config, PluginCompiler};
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Parser)]
#[command(
    name = "gateway",
    version,
    about = "AI API gateway: one base URL for many vendors"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run the gateway. `SIGHUP` reloads channels, models and prices from
    /// the config file.
    Serve {
        #[arg(long, short, default_value = "gateway.toml", env = "GATEWAY_CONFIG")]
        config: PathBuf,
    },
    /// Check a config file and exit (non-zero, naming the field, if invalid).
    CheckConfig {
        #[arg(long, short, default_value = "gateway.toml", env = "GATEWAY_CONFIG")]
        config: PathBuf,
    },
    /// Manage accounts, tokens and plugins of a running gateway.
    Admin(AdminArgs),
    /// Tools for adapter authors.
    #[command(subcommand)]
    Adapter(AdapterCommand),
    /// Compile a component (read from standard input) into the native code
    /// file OUT; what `serve` runs in a child process for a component not in
    /// its plugin cache.
    #[command(hide = true)]
    CompileComponent {
        #[arg(long)]
        out: PathBuf,
    },
}

#[derive(Subcommand)]
enum AdapterCommand {
    /// Run a vendor adapter component (text or video) against recorded
    /// fixtures, with no network; print a diff for each mismatch; exit
    /// non-zero on any failure.
    Test {
        /// The adapter component (`.wasm`).
        wasm: PathBuf,
        /// A folder of `*.json` fixtures (see the README).
        fixtures: PathBuf,
        /// Write what the adapter produced into the fixtures' expectations.
        #[arg(long)]
        update: bool,
    },
}

/// This program, for the compiler processes `serve` starts. On Linux the
/// running binary itself (`/proc/self/exe` opens the file this process was
/// started from, even after an upgrade replaced it on disk), so the child's
/// code settings are the server's.
fn this_program() -> PathBuf {
    if cfg!(target_os = "linux") {
        return PathBuf::from("/proc/self/exe");
    }
    std::env::current_exe().unwrap_or_else(|_| PathBuf::from("gateway"))
}

/// `compile-component --out OUT`: the component on standard input.
fn compile_component(out: &std::path::Path) -> ExitCode {
    use std::io::Read;
    let mut bytes = Vec::new();
    if let Err(e) = std::io::stdin().read_to_end(&mut bytes) {
        eprintln!("error: cannot read the component: {e}");
        return ExitCode::FAILURE;
    }
    match gateway::plugins::sandbox::compile_component(&bytes, out) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

/// The log on stderr (`RUST_LOG`, default `info`), and with
/// `[tracing] otlp_endpoint` the OpenTelemetry layer, whose exporter is
/// returned to be flushed at exit. The log never shows the exported spans.
fn init_logging(
    config: &Config,
    rt: &tokio::runtime::Runtime,
) -> anyhow::Result<Option<gateway::telemetry::Tracing>> {
    use tracing_subscriber::layer::SubscriberExt;
    use tracing_subscriber::util::SubscriberInitExt;
    use tracing_subscriber::Layer;
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info,wasmtime=warn,cranelift=warn"))
        .add_directive(format!("{}=off", gateway::telemetry::TARGET).parse()?);
    let log = tracing_subscriber::fmt::layer()
        .with_writer(std::io::stderr)
        .with_filter(filter);
    let (otel, tracing) = match gateway::telemetry::layer(&config.tracing, rt.handle().clone())? {
        Some((layer, tracing)) => (Some(layer), Some(tracing)),
        None => (None, None),
    };
    tracing_subscriber::registry().with(log).with(otel).init();
    Ok(tracing)
}

/// The async runtime that serves requests, with `worker_threads` threads
/// (`None`: one per core).
///
/// One thread is tokio's current-thread scheduler, not the work-stealing one
/// with a single worker. The work-stealing scheduler runs a woken task next
/// on the thread that woke it (its LIFO slot) and keeps the machinery for
/// handing tasks between threads; with one thread that buys nothing, and the
/// current-thread scheduler, which runs ready tasks in the order they became
/// ready, served the bench's load at c=32 with about a quarter less CPU per
/// request (87 → 65 µs, measured side by side; README, "Benchmark").
fn runtime(worker_threads: Option<usize>) -> std::io::Result<tokio::runtime::Runtime> {
    let mut rt = match worker_threads {
        Some(1) => tokio::runtime::Builder::new_current_thread(),
        Some(n) => {
            let mut rt = tokio::runtime::Builder::new_multi_thread();
            rt.worker_threads(n);
            rt
        }
        None => tokio::runtime::Builder::new_multi_thread(),
    };
    rt.enable_all().build()
}

/// jemalloc rather than glibc's malloc: under load glibc gives each runtime
/// thread its own arena and keeps what they freed (the process grew from
/// about 40 to over 100 MiB in a short run and stayed there).
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

/// jemalloc's settings, read when it starts: a background thread returns
/// pages freed for a second to the system even while the process is idle
/// (the compiler's memory after loading adapters, a burst's buffers); and
/// an arena per CPU rather than jemalloc's default of four per CPU, each
/// with its own partly used pages and its own background thread (about
/// 0.45 MiB less private memory idle on 2 cores, with no difference in CPU
/// per request visible in interleaved runs at 32 connections).
/// (A C string: jemalloc reads `const char *malloc_conf`.)
#[allow(non_upper_case_globals)]
#[export_name = "_rjem_malloc_conf"]
pub static malloc_conf: Option<&'static u8> = Some(&MALLOC_CONF[0]);
const MALLOC_CONF: &[u8] =
    b"background_thread:true,dirty_decay_ms:1000,muzzy_decay_ms:0,percpu_arena:percpu\0";

fn main() -> ExitCode {
    // `RUST_BACKTRACE=1` also makes every `anyhow` error capture a backtrace,
    // and wasmtime builds such errors on ordinary paths (tearing down a
    // store). Keep panic backtraces, skip the per-error ones, unless asked.
    if std::env::var_os("RUST_LIB_BACKTRACE").is_none() {
        std::env::set_var("RUST_LIB_BACKTRACE", "0");
    }
    let cli = Cli::parse();
    match cli.command {
        Command::CheckConfig { config } => {
            // Progress on stderr; stdout carries the verdict alone.
            eprintln!(
                "checking {}: every field, secrets, channels against models, prices...",
                config.display()
            );
            check_config(&config)
        }
        Command::Admin(args) => admin_cli::run(args),
        Command::CompileComponent { out } => compile_component(&out),

        Command::Adapter(AdapterCommand::Test {
            wasm,
            fixtures,
            update,
        }) => gateway::adapter_kit::main(&wasm, &fixtures, update),
        Command::Serve { config } => {
            let mut config = match Config::load(&config) {
                Ok(c) => c,
                Err(e) => {
                    eprintln!("error: {e}");
                    return ExitCode::from(2);
                }
            };
            config.plugins.compiler = PluginCompiler::Child(this_program());
            let rt = match runtime(config.worker_threads) {
                Ok(rt) => rt,
                Err(e) => {
                    eprintln!("error: cannot start the async runtime: {e}");
                    return ExitCode::FAILURE;
                }
            };
            let tracing = match init_logging(&config, &rt) {
                Ok(t) => t,
                Err(e) => {
                    eprintln!("error: cannot start tracing: {e:#}");
                    return ExitCode::FAILURE;
                }
            };
            let served = rt.block_on(serve(config));
            if let Some(t) = tracing {
                // The export runs on the runtime: flush while it is alive.
                let _ = rt.block_on(tokio::task::spawn_blocking(move || t.shutdown()));
            }
            match served {
                Ok(()) => ExitCode::SUCCESS,
                Err(e) => {
                    eprintln!("error: {e:#}");
                    ExitCode::FAILURE
                }
            }
        }
    }
}

/// `check-config`: the verdict, and what the file configures.
fn check_config(config: &std::path::Path) -> ExitCode {
    match Config::load(config) {
        Ok(c) => {
            println!(
                "{}: ok ({} channel(s), {} model(s), {} video model(s))",
                config.display(),
                c.channels.len(),
                c.models.len(),
                c.video_models.len()
            );
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(2)
        }
    }
}

async fn serve(config: Config) -> anyhow::Result<()> {
    let running = gateway::server::start(config, None).await?;
    #[cfg(unix)]
    if let Err(e) = gateway::reload::reload_on_hangup(&running.state) {
        tracing::warn!("cannot listen for SIGHUP (config reload): {e}");
    }
    let stopped = running.stop_token();
    tokio::select! {
        _ = shutdown_signal() => tracing::info!("shutting down"),
        _ = stopped.cancelled() => {}
    }
    // Streams in flight get a moment to finish; then we go regardless.
    if tokio::time::timeout(std::time::Duration::from_secs(10), running.shutdown())
        .await
        .is_err()
    {
        tracing::warn!("some connections were still open after 10 s; exiting anyway");
    }
    Ok(())
}

async fn shutdown_signal() {
    let ctrl_c = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        let mut term =
            match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
                Ok(s) => s,
                Err(_) => {
                    let _ = ctrl_c.await;
                    return;
                }
            };
        tokio::select! {
            _ = ctrl_c => {}
            _ = term.recv() => {}
        }
    }
    #[cfg(not(unix))]
    {
        let _ = ctrl_c.await;
    }
}

#[cfg(test)]
mod tests {
    use super::runtime;
    use tokio::runtime::RuntimeFlavor;

    #[test]
    fn one_thread_is_the_current_thread_scheduler() {
        let flavor = |n| runtime(n).unwrap().handle().runtime_flavor();
        assert_eq!(flavor(Some(1)), RuntimeFlavor::CurrentThread);
        assert_eq!(flavor(Some(2)), RuntimeFlavor::MultiThread);
        assert_eq!(flavor(None), RuntimeFlavor::MultiThread);
    }
}
