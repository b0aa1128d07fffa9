//! `loadgen`: a small closed-loop HTTP load generator for `make bench`.
//!
//! Runs the same chat load against the simulator directly and against the
//! gateway (or another proxy) in front of it, so the reports are comparable;
//! non-streamed, or streamed with time to first token and frames counted.
//! With `--cpu`, also the CPU the processes under test use in the measured
//! window. Prints a human line, then one JSON line; exits 1 when more than 1%
//! of the measured requests failed.

mod args;
mod cpu;
mod sse;
mod stats;
mod target;
mod worker;

use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use bytes::Bytes;
use clap::Parser as _;
use hyper::header::HeaderValue;
use tokio::time::Instant;

use args::{Args, Protocol};
use stats::{Report, Tally};
use worker::Job;

/// How long requests still in flight at the end may take to finish.
const GRACE: Duration = Duration::from_secs(10);

#[tokio::main]
async fn main() -> ExitCode {
    match run(Args::parse()).await {
        Ok(report) if !report.failed() => ExitCode::SUCCESS,
        Ok(_) => ExitCode::FAILURE,
        Err(e) => {
            eprintln!("loadgen: {e:#}");
            ExitCode::from(2)
        }
    }
}

async fn run(args: Args) -> anyhow::Result<Report> {
    let target = target::resolve(&args.url).await?;
    if args.stream && args.protocol != Protocol::OpenaiChat {
        anyhow::bail!("--stream reads OpenAI chat streams only");
    }
    // Fail before loading anything when a process is not there.
    cpu::sample_all(&args.cpu)?;
    // The same question in either protocol (both bodies carry max_tokens).
    let mut body = serde_json::json!({
        "model": args.model,
        "messages": [{"role": "user", "content": args.prompt}],
        "max_tokens": args.max_tokens,
    });
    if args.stream {
        body["stream"] = true.into();
    }
    let extra_headers = match args.protocol {
        Protocol::OpenaiChat => Vec::new(),
        Protocol::AnthropicMessages => vec![(
            hyper::header::HeaderName::from_static("anthropic-version"),
            HeaderValue::from_static("2023-06-01"),
        )],
    };
    let start = Instant::now();
    let record_from = start + Duration::from_secs(args.warmup_secs);
    let stop_at = record_from + Duration::from_secs(args.duration_secs);
    let job = Arc::new(Job {
        host: HeaderValue::from_str(&target.authority).context("Host header")?,
        target,
        body: Bytes::from(body.to_string()),
        auth: HeaderValue::from_str(&format!("Bearer {}", args.key))
            .context("--key is not a valid header value")?,
        extra_headers,
        stream: args.stream,
        record_from,
        stop_at,
        give_up_at: stop_at + GRACE,
    });

    let groups = Arc::new(args.cpu.clone());
    let cpu_start = {
        let groups = groups.clone();
        tokio::spawn(async move {
            tokio::time::sleep_until(record_from).await;
            cpu::sample_all(&groups)
        })
    };
    let ramp = Duration::from_millis(args.ramp_ms);
    let workers: Vec<_> = (0..args.concurrency)
        .map(|i| {
            let begin = start + worker::start_offset(i, args.concurrency, ramp);
            tokio::spawn(worker::run(job.clone(), begin))
        })
        .collect();
    let mut total = Tally::new();
    for w in workers {
        total.merge(w.await.context("worker panicked")?)?;
    }
    let window = Instant::now().saturating_duration_since(record_from);
    let cpu_end = cpu::sample_all(&groups);

    let mut report = Report::new(&args.label, &total, window, args.stream);
    match (cpu_start.await.context("CPU sampler panicked")?, cpu_end) {
        (Ok(a), Ok(b)) => {
            for ((group, a), b) in groups.iter().zip(a).zip(b) {
                report
                    .cpu_ticks
                    .insert(group.name.clone(), b.saturating_sub(a));
            }
        }
        (Err(e), _) | (_, Err(e)) => eprintln!("loadgen: no CPU figures: {e:#}"),
    }
    println!("{}", report.human());
    println!("{}", report.json()?);
    if report.errors > 0 {
        eprintln!("loadgen: sample errors: {}", total.notes.join("; "));
    }
    Ok(report)
}
