//! Command line. The limits keep a mistyped run from loading the machine
//! (which others share) for long.

use clap::{Parser, ValueEnum};

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
    about = "Fires non-streamed chat requests at a loopback endpoint and reports latency"
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
    /// Measured period.
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u64).range(1..=600))]
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
        let a = parse(&["--protocol", "anthropic-messages"]).expect("parse");
        assert_eq!(a.protocol, Protocol::AnthropicMessages);
    }

    #[test]
    fn bounds_are_enforced() {
        assert!(parse(&["--concurrency", "0"]).is_err());
        assert!(parse(&["--concurrency", "5000"]).is_err());
        assert!(parse(&["--duration-secs", "0"]).is_err());
        assert!(parse(&["--duration-secs", "3601"]).is_err());
        assert!(parse(&["--warmup-secs", "0", "--label", "gateway"]).is_ok());
        assert!(Args::try_parse_from(["loadgen", "--url", "http://127.0.0.1/"]).is_err());
    }
}
