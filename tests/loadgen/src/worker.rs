//! One load worker: a single keep-alive HTTP/1.1 connection sending the same
//! request back to back (and, for streams, reading each to its end marker).

use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context as _};
use bytes::Bytes;
use futures_util::StreamExt;
use http_body_util::{BodyExt as _, Full};
use hyper::client::conn::http1::{self, SendRequest};
use hyper::header::{HeaderValue, AUTHORIZATION, CONTENT_TYPE, HOST};
use hyper::{Method, Request};
use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;
use tokio::time::Instant;

use crate::sse::{self, Scanner};
use crate::stats::Tally;
use crate::target::Target;

/// What every worker sends, built once.
pub struct Job {
    pub target: Target,
    pub body: Bytes,
    pub auth: HeaderValue,
    pub host: HeaderValue,
    /// Headers the protocol needs beside the key (`anthropic-version`).
    pub extra_headers: Vec<(hyper::header::HeaderName, HeaderValue)>,
    /// The body asks for a stream (OpenAI chat SSE).
    pub stream: bool,
    /// Requests started before this are warm-up and not recorded.
    pub record_from: Instant,
    /// No request is started at or after this.
    pub stop_at: Instant,
    /// Anything still in flight then is abandoned as a transport error.
    pub give_up_at: Instant,
}

/// When worker `i` of `n` starts, `ramp` spreading them evenly.
pub fn start_offset(i: u64, n: u64, ramp: Duration) -> Duration {
    if n == 0 {
        return Duration::ZERO;
    }
    let nanos = ramp.as_nanos() * u128::from(i.min(n)) / u128::from(n);
    Duration::from_nanos(u64::try_from(nanos).unwrap_or(u64::MAX))
}

/// Runs one worker, starting at `start`.
pub async fn run(job: Arc<Job>, start: Instant) -> Tally {
    tokio::time::sleep_until(start.min(job.stop_at)).await;
    let mut tally = Tally::new();
    let mut conn: Option<SendRequest<Full<Bytes>>> = None;
    while Instant::now() < job.stop_at {
        if conn.as_ref().is_none_or(|s| s.is_closed()) {
            match tokio::time::timeout_at(job.give_up_at, connect(&job.target)).await {
                Ok(Ok(s)) => conn = Some(s),
                outcome => {
                    if Instant::now() >= job.record_from {
                        tally.transport_errors += 1;
                    }
                    if let Ok(Err(e)) = outcome {
                        tally.note(format!("connect: {e:#}"));
                    }
                    // Avoid spinning on a refused port.
                    tokio::time::sleep(Duration::from_millis(20)).await;
                    continue;
                }
            }
        }
        let Some(sender) = conn.as_mut() else {
            continue;
        };
        // A server that closed the idle connection is not a failed request.
        if tokio::time::timeout_at(job.give_up_at, sender.ready())
            .await
            .map_or(true, |r| r.is_err())
        {
            conn = None;
            continue;
        }

        let started = Instant::now();
        let recording = started >= job.record_from;
        let outcome =
            tokio::time::timeout_at(job.give_up_at, exchange(sender, &job, started, &mut tally))
                .await;
        let elapsed = started.elapsed();
        match outcome {
            Ok(Ok(Answer { status, ttft })) if (200..300).contains(&status) => {
                if recording {
                    tally.latencies.saturating_record(micros(elapsed));
                    if let Some(t) = ttft {
                        tally.ttft.saturating_record(micros(t));
                    }
                    tally.ok += 1;
                } else {
                    tally.warmup_ok += 1;
                }
            }
            Ok(Ok(Answer { status, .. })) => {
                if recording {
                    tally.non_2xx += 1;
                    tally.note(format!("HTTP {status}"));
                }
            }
            Ok(Err(e)) => {
                if recording {
                    tally.transport_errors += 1;
                    tally.note(format!("transport: {e:#}"));
                }
                conn = None;
            }
            Err(_) => {
                if recording {
                    tally.transport_errors += 1;
                    tally.note("request still running at the deadline".to_owned());
                }
                break;
            }
        }
    }
    tally
}

async fn connect(target: &Target) -> anyhow::Result<SendRequest<Full<Bytes>>> {
    let stream = TcpStream::connect(&target.addrs[..])
        .await
        .context("connecting")?;
    // Small requests and responses: don't let Nagle add latency.
    stream.set_nodelay(true)?;
    let (sender, connection) = http1::handshake(TokioIo::new(stream)).await?;
    // The connection task ends by itself once the sender is dropped.
    tokio::spawn(async move {
        let _ = connection.await;
    });
    Ok(sender)
}

fn micros(d: Duration) -> u64 {
    u64::try_from(d.as_micros()).unwrap_or(u64::MAX).max(1)
}

/// What one request got.
struct Answer {
    status: u16,
    /// Streams: from sending the request to the end of the first content
    /// delta.
    ttft: Option<Duration>,
}

/// Sends one request and reads the whole response body. A 2xx stream must
/// carry content and end with `data: [DONE]`; its events received from the
/// start of the measured window on are added to `tally.frames`.
async fn exchange(
    sender: &mut SendRequest<Full<Bytes>>,
    job: &Job,
    started: Instant,
    tally: &mut Tally,
) -> anyhow::Result<Answer> {
    let mut req = Request::builder()
        .method(Method::POST)
        .uri(job.target.path.as_str())
        .header(HOST, job.host.clone())
        .header(CONTENT_TYPE, "application/json")
        .header(AUTHORIZATION, job.auth.clone());
    for (name, value) in &job.extra_headers {
        req = req.header(name, value);
    }
    let req = req.body(Full::new(job.body.clone()))?;
    let resp = sender.send_request(req).await?;
    let status = resp.status().as_u16();
    // Reading to the end is part of the latency and keeps the connection
    // reusable.
    let body = resp.into_body();
    if !job.stream || !(200..300).contains(&status) {
        body.collect().await?;
        return Ok(Answer { status, ttft: None });
    }
    let mut scan = Scanner::default();
    let mut ttft = None;
    let mut events = std::pin::pin!(sse::events(body.into_data_stream()));
    while let Some(data) = events.next().await {
        let first_content = scan.event(&data.map_err(anyhow::Error::msg)?);
        let now = Instant::now();
        if now >= job.record_from {
            tally.frames += 1;
        }
        if first_content {
            ttft = Some(now.saturating_duration_since(started));
        }
    }
    if !scan.done {
        bail!("the stream ended without data: [DONE]");
    }
    if ttft.is_none() {
        bail!("the stream carried no content");
    }
    Ok(Answer { status, ttft })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ramp_spreads_starts_evenly() {
        let ramp = Duration::from_millis(1280);
        let starts: Vec<u128> = (0..4)
            .map(|i| start_offset(i, 4, ramp).as_millis())
            .collect();
        assert_eq!(starts, [0, 320, 640, 960]);
        assert_eq!(start_offset(3, 4, Duration::ZERO), Duration::ZERO);
        assert_eq!(start_offset(0, 0, ramp), Duration::ZERO);
        assert!(start_offset(9, 4, ramp) <= ramp);
    }
}
