//! `upstream-sim`: the simulator as a process, for the demo and SDK tests.

use std::io::{IsTerminal as _, Write as _};
use std::net::SocketAddr;

use clap::Parser;
use upstream_sim::{SimOptions, VideoSpeed};

#[derive(Debug, Parser)]
#[command(
    version,
    about = "Deterministic fake of OpenAI, Anthropic and Gemini vendors"
)]
struct Args {
    /// Address to listen on (port 0 picks a free one).
    #[arg(long, default_value = "127.0.0.1:9090")]
    listen: SocketAddr,
    /// Require KEY on the vendor routes, in each vendor's scheme
    /// (`Authorization: Bearer`, `x-api-key`, `x-goog-api-key` or `?key=`).
    #[arg(long, env = "UPSTREAM_SIM_API_KEY")]
    api_key: Option<String>,
    /// Video tasks succeed at the N-th status poll.
    #[arg(long, value_name = "N", conflicts_with = "video_millis")]
    video_polls: Option<u32>,
    /// Video tasks succeed T milliseconds after submission instead.
    #[arg(long, value_name = "T")]
    video_millis: Option<u64>,
    /// Also run an SMTP sink on ADDR that keeps every message it gets and
    /// shows them at `GET /_sim/mail` (the web console's e-mail in the demo
    /// and the browser test).
    #[arg(long, value_name = "ADDR")]
    smtp_listen: Option<SocketAddr>,
    /// How many of the newest requests `GET /_sim/requests` shows (default
    /// 10000); 0 keeps none, as a mock for benchmarks should.
    #[arg(long, value_name = "N")]
    keep_requests: Option<usize>,
}

impl Args {
    fn video_speed(&self) -> VideoSpeed {
        match (self.video_millis, self.video_polls) {
            (Some(ms), _) => VideoSpeed::Millis(ms),
            (None, Some(n)) => VideoSpeed::Polls(n),
            (None, None) => VideoSpeed::default(),
        }
    }
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    // Logs go to stderr: stdout carries only the readiness line scripts wait for.
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .init();

    let args = Args::parse();
    let server = upstream_sim::start(
        args.listen,
        SimOptions {
            video: args.video_speed(),
            api_key: args.api_key,
            keep_requests: args.keep_requests,
        },
    )
    .await?;
    let smtp = match args.smtp_listen {
        Some(addr) => Some(server.start_smtp(addr)?),
        None => None,
    };
    {
        let mut out = std::io::stdout().lock();
        if let Some(smtp) = smtp {
            writeln!(out, "upstream-sim SMTP sink on {smtp}")?;
        }
        writeln!(out, "upstream-sim listening on http://{}", server.addr())?;
        out.flush()?;
    }
    wait_for_signal().await?;
    tracing::info!("shutting down");
    server.shutdown().await;
    Ok(())
}

#[cfg(unix)]
async fn wait_for_signal() -> anyhow::Result<()> {
    use tokio::signal::unix::{signal, SignalKind};
    let mut term = signal(SignalKind::terminate())?;
    let mut int = signal(SignalKind::interrupt())?;
    tokio::select! {
        _ = term.recv() => {}
        _ = int.recv() => {}
    }
    Ok(())
}

#[cfg(not(unix))]
async fn wait_for_signal() -> anyhow::Result<()> {
    tokio::signal::ctrl_c().await?;
    Ok(())
}
