//! Relaying a streamed answer: vendor bytes → whole events (host framing) →
//! the adapter's stream translator → client events, as they arrive.
//!
//! A background task owns the vendor stream, the guest store and the call's
//! [`Charge`]. If the client goes away, the task keeps reading the vendor
//! stream to its end (each wait bounded by the idle timeout) so the usage
//! the vendor will charge is known and billed. If the vendor stream breaks,
//! stalls, or ends without its protocol's finish marker, the client gets its
//! protocol's error event instead of the closing events — a cut answer never
//! looks complete — and whatever usage the vendor had reported by then is
//! billed.

use super::charge::Charge;
use super::text::sse_headers;
use crate::error::{ApiError, Envelope, REQUEST_ID};
use crate::plugins::bindings::types::SseEvent;
use crate::plugins::session::{AdapterError, AdapterSession};
use crate::sse;
use axum::body::Body;
use axum::response::Response;
use bytes::Bytes;
use futures_util::StreamExt;
use std::time::Duration;
use tokio::sync::mpsc;
use wasmtime::component::ResourceAny;

/// A vendor stream with its translator, ready to relay.
pub(crate) struct Opened {
    pub session: AdapterSession,
    pub translator: ResourceAny,
    pub upstream: reqwest::Response,
}

/// Starts the relay task and returns the streaming response.
pub(crate) fn respond(
    opened: Opened,
    charge: Charge,
    envelope: Envelope,
    idle_timeout: Duration,
) -> Response {
    // A small buffer: back-pressure from a slow client reaches the vendor.
    let (tx, rx) = mpsc::channel::<Bytes>(32);
    let request_id = charge.request_id().to_string();
    tokio::spawn(REQUEST_ID.scope(request_id, pump(opened, charge, envelope, idle_timeout, tx)));
    let body = futures_util::stream::unfold(rx, |mut rx| async move {
        rx.recv()
            .await
            .map(|b| (Ok::<_, std::convert::Infallible>(b), rx))
    });
    let mut resp = Response::new(Body::from_stream(body));
    sse_headers(&mut resp);
    resp
}

fn encode(events: &[SseEvent]) -> Bytes {
    let mut out = Vec::new();
    for ev in events {
        sse::encode(ev.event.as_deref(), &ev.data, &mut out);
    }
    Bytes::from(out)
}

/// Sends to the client while it listens; remembers when it stopped.
struct Client {
    tx: mpsc::Sender<Bytes>,
    gone: bool,
}

impl Client {
    async fn send(&mut self, bytes: Bytes) {
        if self.gone || bytes.is_empty() {
            return;
        }
        if self.tx.send(bytes).await.is_err() {
            self.gone = true;
        }
    }
}

async fn pump(
    opened: Opened,
    charge: Charge,
    envelope: Envelope,
    idle_timeout: Duration,
    tx: mpsc::Sender<Bytes>,
) {
    let Opened {
        mut session,
        translator,
        upstream,
    } = opened;
    let mut client = Client { tx, gone: false };
    let mut events = Box::pin(sse::events(
        upstream.bytes_stream(),
        sse::DEFAULT_MAX_PENDING,
    ));
    let mut failure: Option<ApiError> = None;
    // After a trap or deadline the instance is unusable; don't call it again.
    let mut guest_broken = false;
    loop {
        let next = match tokio::time::timeout(idle_timeout, events.next()).await {
            Err(_) => {
                failure = Some(ApiError::UpstreamTimeout(idle_timeout.as_secs()));
                break;
            }
            Ok(None) => break,
            Ok(Some(Err(e))) => {
                failure = Some(ApiError::UpstreamUnreachable(format!(
                    "the stream broke: {e}"
                )));
                break;
            }
            Ok(Some(Ok(ev))) => ev,
        };
        let ev = SseEvent {
            event: next.event,
            data: next.data,
        };
        match session.push(translator, &ev).await {
            Ok(out) => client.send(encode(&out)).await,
            Err(e) => {
                guest_broken = matches!(e, AdapterError::Guest(_));
                failure = Some(e.into());
                break;
            }
        }
    }
    // Ask the translator for the usage even after a failure: a vendor that
    // reported usage before breaking is billed for it.
    let mut usage = None;
    let mut closing = Bytes::new();
    if !guest_broken {
        match session.finish(translator).await {
            Ok(end) => {
                usage = end.usage;
                if failure.is_none() {
                    if end.complete {
                        closing = encode(&end.events);
                    } else {
                        failure = Some(ApiError::UpstreamIncomplete);
                    }
                }
            }
            Err(e) if failure.is_none() => failure = Some(e.into()),
            Err(_) => {}
        }
    }
    let (status, note) = match &failure {
        Some(e) => {
            let ev = e.stream_event(envelope, charge.request_id());
            let mut out = Vec::new();
            sse::encode(ev.event, &ev.data, &mut out);
            closing = Bytes::from(out);
            (e.status().as_u16(), Some(e.to_string()))
        }
        None if client.gone => (
            200,
            Some("client disconnected before the end of the stream".into()),
        ),
        None => (200, None),
    };
    // Settle before the client sees the end of the stream: a call the client
    // saw complete must never be lost to a crash in between.
    charge.settle(usage.as_ref(), status, note).await;
    client.send(closing).await;
}
