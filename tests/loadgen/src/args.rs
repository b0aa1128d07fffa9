//! Command line. The limits keep a mistyped run from loading the machine
//! (which others share) for long.

use clap::{Parser, ValueEnum};

use crate::cpu::CpuGroup;

/// The client protocol the requests are written in.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Protocol {
    /// `POST .../chat/completions` bodies.
    OpenaiChat,
    /// `POST .../messages` bodies, with `anthropic-version`.
    AnthropicMessages,
}

#[derive(Clone, Debug, Parser)]
#[command(
    version,
    about = "Fires chat requests at a loopback endpoint and reports latency (and, streamed, time to first token)"
)]
pub struct Args {
    /// Chat completions URL; must be http:// on 127.0.0.1, ::1 or localhost.
    #[arg(long)]
    pub url: String,
    /// Sent as `Authorization: Bearer KEY`.
    #[arg(long)]
    pub key: String,
    #[arg(long, default_value = "sim-chat")]
    pub model: String,
    /// Workers, each with its own keep-alive connection.
    #[arg(long, default_value_t = 16, value_parser = clap::value_parser!(u64).range(1..=1024))]
    pub concurrency: u64,
    /// Measured period (up to an hour, for `make bench`'s soak).
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u64).range(1..=3600))]
    pub duration_secs: u64,
    /// Unrecorded period before measuring.
    #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u64).range(0..=60))]
    pub warmup_secs: u64,
    /// Names the run in the output (e.g. `direct`, `gateway`).
    #[arg(long, default_value = "run")]
    pub label: String,
    /// The protocol of the request bodies (the URL must match it).
    #[arg(long, value_enum, default_value_t = Protocol::OpenaiChat)]
    pub protocol: Protocol,
    /// The user message (may carry the simulator's `[[sim:...]]` directives).
    #[arg(long, default_value = "hello from the load generator")]
    pub prompt: String,
    /// `max_tokens` of every request.
    #[arg(long, default_value_t = 16, value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
    pub max_tokens: u64,
    /// Streamed requests (`"stream": true`, OpenAI chat only): also reports
    /// time to the first content delta and counts the SSE events received.
    #[arg(long)]
    pub stream: bool,
    /// Workers start spread evenly over this many milliseconds instead of
    /// all at once (streams of equal length then keep distinct phases).
    #[arg(long, default_value_t = 0, value_parser = clap::value_parser!(u64).range(0..=60_000))]
    pub ramp_ms: u64,
    /// `NAME=PID[,PID...]`: reports the CPU clock ticks (user + system, from
    /// `/proc/PID/stat`) these processes use during the measured window,
    /// summed, as `cpu_ticks.NAME`. Repeatable.
    #[arg(long = "cpu", value_name = "NAME=PIDS")]
    pub cpu: Vec<CpuGroup>,
}

#[cfg(test)]
mod tests {
    use super::*;

    const BASE: [&str; 5] = [
        "loadgen",
        "--url",
        "http://127.0.0.1:9090/v1/chat/completions",
        "--key",
        "k",
    ];

    fn parse(extra: &[&str]) -> Result<Args, clap::Error> {
        Args::try_parse_from(BASE.iter().chain(extra))
    }

    #[test]
    fn defaults() {
        let a = parse(&[]).expect("parse");
        assert_eq!(
            (
                a.concurrency,
                a.duration_secs,
                a.warmup_secs,
                a.model.as_str(),
                a.label.as_str()
            ),
            (16, 10, 2, "sim-chat", "run")
        );
        assert_eq!(a.protocol, Protocol::OpenaiChat);
        assert_eq!(
            (a.prompt.as_str(), a.max_tokens, a.stream, a.cpu.len()),
            ("hello from the load generator", 16, false, 0)
        );
        let a = parse(&["--protocol", "anthropic-messages"]).expect("parse");
        assert_eq!(a.protocol, Protocol::AnthropicMessages);
    }

    #[test]
    fn stream_and_cpu_options() {
        let a = parse(&[
            "--stream",
            "--prompt",
            "hi [[sim:words=64]]",
            "--max-tokens",
            "256",
            "--ramp-ms",
            "1280",
            "--cpu",
            "server=10,11",
            "--cpu",
            "mock=12",
        ])
        .expect("parse");
        assert!(a.stream);
        assert_eq!(
            (a.prompt.as_str(), a.max_tokens),
            ("hi [[sim:words=64]]", 256)
        );
        let groups: Vec<(&str, &[u32])> = a
            .cpu
            .iter()
            .map(|g| (g.name.as_str(), g.pids.as_slice()))
            .collect();
        assert_eq!(groups, [("server", &[10, 11][..]), ("mock", &[12][..])]);
        assert!(parse(&["--cpu", "server"]).is_err());
        assert!(parse(&["--max-tokens", "0"]).is_err());
        assert!(parse(&["--ramp-ms", "60001"]).is_err());
    }

    #[test]
    fn bounds_are_enforced() {
        assert!(parse(&["--concurrency", "0"]).is_err());
        assert!(parse(&["--concurrency", "5000"]).is_err());
        assert!(parse(&["--duration-secs", "0"]).is_err());
        assert!(parse(&["--duration-secs", "3600"]).is_ok());
        assert!(parse(&["--duration-secs", "3601"]).is_err());
        assert!(parse(&["--warmup-secs", "0", "--label", "gateway"]).is_ok());
        assert!(Args::try_parse_from(["loadgen", "--url", "http://127.0.0.1/"]).is_err());
    }
}
