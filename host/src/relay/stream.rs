//! Relaying a streamed answer: vendor bytes → whole events (host framing) →
//! the adapter's stream translator → client events, as they arrive.
//!
//! Nothing is committed before the vendor's stream has produced the
//! answer's first text for the client: [`start`] reads vendor events,
//! holding the client events before the text (a role chunk, a
//! `message_start`), until one carries text (or the stream ends whole), and
//! only then are the `200` and the held events sent. A failure before that
//! point — the stream breaks, stalls, ends cut, opens with an error event,
//! or the translator fails — is the attempt's failure, and the call moves
//! on to the next channel; a fallback never follows a `200` or a
//! `message_start` from a failed attempt.
//!
//! A background task owns the vendor stream, the guest store and the call's
//! [`Charge`]. If the client goes away — it disconnects, or stops reading
//! and the edge drops it after `write_timeout` — the task stops at once: it
//! closes the vendor connection (so the vendor stops generating), releases
//! the guest instance and settles for what was relayed (`relay::relayed`).
//! If the vendor stream breaks, stalls, sends what cannot be translated, or
//! ends without its protocol's finish marker, the client gets its protocol's
//! error event instead of the closing events — a cut answer never looks
//! complete — and the call is billed by the same rule for what was relayed;
//! a stream that fails before any of the answer went out is billed only
//! what the vendor had reported by then (usually nothing). A whole stream
//! from a vendor that reported no usage is billed the gateway's count
//! (`billing::tokens`), and an OpenAI client that asked for the usage chunk
//! gets one with that count.
//!
//! Where the adapter asked for it (`answer-mode.splice`), the stream's
//! ordinary events are relayed by the host without the translator
//! (`relay::splice`); the rest, and the end, are the translator's as above.
//!
//! An event for the translator is taken with the vendor events already
//! read behind it (a stream's last few usually come in one read: a
//! finishing chunk, a usage report, an end marker, the body's end). When
//! the stream's end came with them they all go to the translator's
//! `finish` as its `rest`: one guest call ends the stream, where a push for
//! each, a `finish` and the translator's drop were five, each a wake of the
//! guest with wasmtime's fixed cost. Otherwise they are pushed one by one,
//! as they came. Nothing waits for an event that has not come, beyond one
//! turn of the runtime at a spliced stream's end ([`READ_AHEAD`]).

use super::charge::Charge;
use super::relayed::{self, Relayed};
use super::splice::Splice;
use super::text::sse_headers;
use crate::error::{ApiError, REQUEST_ID};
use crate::plugins::bindings::types::{PluginError, Protocol, SseEvent};
use crate::plugins::session::{AdapterError, AdapterSession, StreamClose};
use crate::protocol::ClientProtocol;
use crate::sse;
use axum::body::Body;
use axum::response::Response;
use bytes::Bytes;
use futures_util::{FutureExt, Stream, StreamExt};
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::sync::mpsc;
use wasmtime::component::ResourceAny;

/// The vendor's event stream, as the host frames it.
type VendorEvents = Pin<Box<dyn Stream<Item = Result<sse::Event, sse::SseError>> + Send>>;

/// A vendor stream whose first client events are known: ready to commit.
pub(crate) struct Opened {
    session: AdapterSession,
    translator: ResourceAny,
    events: Watched,
    /// The ordinary events the host relays itself, if the adapter asked.
    splice: Option<Splice>,
    /// The first events for the client.
    first: Vec<Held>,
    /// The stream ended before any client event: how (its closing events
    /// and usage; the translator is finished).
    ended: Option<StreamClose>,
}

/// A client event held until the stream commits.
struct Held {
    event: SseEvent,
    /// Its generated text, when the splice has read it already (the relay
    /// counts that instead of reading the event again).
    read: Option<String>,
}

impl Held {
    /// Whether the event gives the client some of the answer's text.
    fn carries_text(&self, protocol: Protocol) -> bool {
        match &self.read {
            Some(text) => !text.is_empty(),
            None => relayed::carries_text(protocol, &self.event),
        }
    }
}

/// Why a stream could not start.
pub(crate) enum StartFailed {
    /// The vendor's stream broke, stalled or ended cut before its first
    /// event, or opened with an error event: another channel may do better.
    Vendor(ApiError),
    /// The adapter could not translate what the vendor sent (an answer the
    /// vendor made, so it is counted against the channel).
    Untranslatable(AdapterError),
    /// The vendor's stream opened with an error the adapter reported (as
    /// final, since mid-answer it would be; before anything went out
    /// another channel may be tried).
    Refused(AdapterError),
}

/// Client events held before the answer's first text: a stream whose
/// opening events (a role chunk, a `message_start`, pings) go on longer
/// than this is committed anyway.
const HELD_EVENTS: usize = 16;

/// Reads the vendor's stream until it has the answer's first text for the
/// client (holding the client events before it: a role chunk, a
/// `message_start`), or ends whole; see the module's doc. An error event
/// before the first text fails the attempt.
pub(crate) async fn start(
    mut session: AdapterSession,
    translator: ResourceAny,
    upstream: super::vendor::VendorBody,
    protocol: Protocol,
    mut splice: Option<Splice>,
    idle_timeout: Duration,
) -> Result<Opened, StartFailed> {
    let mut events = Watched::new(
        Box::pin(
            sse::events(
                super::vendor::bytes_stream(upstream),
                sse::DEFAULT_MAX_PENDING,
            )
            .fuse(),
        ),
        idle_timeout,
    );
    let mut first: Vec<Held> = Vec::new();
    loop {
        let next = events.next("the stream broke before its first event");
        let ev = match next.await.map_err(StartFailed::Vendor)? {
            None => {
                // Over before any text for the client: a whole (empty)
                // answer, or a cut one.
                return match session.finish(translator, &[]).await {
                    Ok(end) if end.complete => Ok(Opened {
                        session,
                        translator,
                        events,
                        splice,
                        first,
                        ended: Some(end),
                    }),
                    Ok(_) => Err(StartFailed::Vendor(ApiError::UpstreamIncomplete)),
                    Err(e) => Err(untranslatable(e)),
                };
            }
            Some(ev) => ev,
        };
        // The first events are counted with the rest when they go out; a
        // spliced one with the text the splice read in it.
        let mut read = String::new();
        let out: Vec<Held> = match splice.as_mut().and_then(|s| s.relay(&ev, &mut read)) {
            Some(spliced) => vec![Held {
                event: spliced,
                read: Some(read),
            }],
            None => session
                .push(translator, &ev)
                .await
                .map_err(untranslatable)?
                .into_iter()
                .map(|event| Held { event, read: None })
                .collect(),
        };
        if let Some(message) = out.iter().find_map(|h| relayed::error_message(&h.event)) {
            return Err(StartFailed::Vendor(ApiError::Upstream {
                status: 502,
                code: "upstream_error".into(),
                message: format!("the upstream's stream opened with an error: {message}"),
                retry_after: None,
            }));
        }
        let text = out.iter().any(|h| h.carries_text(protocol));
        first.extend(out);
        if text || first.len() >= HELD_EVENTS {
            return Ok(Opened {
                session,
                translator,
                events,
                splice,
                first,
                ended: None,
            });
        }
    }
}

/// The vendor's stream with its stall watch: a wait for the next event
/// longer than `idle_timeout` fails the stream.
///
/// One timer serves the whole stream instead of a timeout per event: each
/// wait only notes when it began, and the timer, when it fires, checks
/// whether the current wait is really that old and otherwise is set again
/// for the wait's own deadline. A stream whose events come faster than
/// `idle_timeout` touches the runtime's timer wheel about once per
/// `idle_timeout`, not twice per relayed frame (a timer registered while
/// the vendor is quiet, then taken out when the event comes). The rule is
/// the same as a timeout around each wait: the time spent handing an event
/// to a slow client is not the vendor's silence.
struct Watched {
    events: VendorEvents,
    idle_timeout: Duration,
    /// When the current wait for an event began.
    waiting_since: tokio::time::Instant,
    timer: Pin<Box<tokio::time::Sleep>>,
}

impl Watched {
    fn new(events: VendorEvents, idle_timeout: Duration) -> Self {
        let now = tokio::time::Instant::now();
        Self {
            events,
            idle_timeout,
            waiting_since: now,
            timer: Box::pin(tokio::time::sleep_until(deadline(now, idle_timeout))),
        }
    }

    /// The vendor's next event, `None` at the end of its stream; a stall of
    /// `idle_timeout` or a broken stream (described as `broke`) is the
    /// error.
    async fn next(&mut self, broke: &str) -> Result<Option<SseEvent>, ApiError> {
        self.waiting_since = tokio::time::Instant::now();
        let item = loop {
            tokio::select! {
                biased;
                item = self.events.next() => break item,
                () = &mut self.timer => {
                    let due = deadline(self.waiting_since, self.idle_timeout);
                    if due <= tokio::time::Instant::now() {
                        return Err(ApiError::UpstreamTimeout(self.idle_timeout.as_secs()));
                    }
                    self.timer.as_mut().reset(due);
                }
            }
        };
        Self::read(item, broke)
    }

    /// The vendor's next event if it has been read already (it came with
    /// the one before), without waiting: `None` while it is still to come.
    fn ready(&mut self, broke: &str) -> Option<Result<Option<SseEvent>, ApiError>> {
        let item = self.events.next().now_or_never()?;
        Some(Self::read(item, broke))
    }

    fn read(
        item: Option<Result<sse::Event, sse::SseError>>,
        broke: &str,
    ) -> Result<Option<SseEvent>, ApiError> {
        match item {
            None => Ok(None),
            Some(Err(e)) => Err(ApiError::UpstreamUnreachable(format!("{broke}: {e}"))),
            Some(Ok(ev)) => Ok(Some(SseEvent {
                event: ev.event,
                data: ev.data,
            })),
        }
    }
}

/// The most vendor events read ahead for one guest call: an event for the
/// translator is taken with those already read behind it, up to this many,
/// and when the stream's end came with them they all go to `finish` (one
/// call for the stream's last events, its end and the translator's drop);
/// otherwise they are pushed one by one, as they came.
///
/// With `turns`, for a spliced stream whose first event for the translator
/// is its end beginning (a finishing chunk: the usage report and `[DONE]`
/// follow at once), reading ahead gives the runtime one turn before giving
/// up on a next event. The pooled client's connection task (`https://`
/// vendors) hands the body over one HTTP chunk at a time and only when
/// asked, so a chunk already received is not readable until that task has
/// run; one turn lets it (and the I/O driver) run. (A driven connection,
/// `driven`, reads in this task's own poll; the turn lets the I/O driver
/// see what came since.) It costs a scheduler turn per event read this
/// way, a few microseconds, against a guest call per event saved.
const READ_AHEAD: usize = 16;

/// What reading ahead found behind an event for the translator.
enum Ahead {
    /// The stream ended after these events (the first is the one read).
    Ended(Vec<SseEvent>),
    /// More is to come: push these, then fail with the stream's breaking
    /// if it broke right after them.
    Push(Vec<SseEvent>, Option<ApiError>),
}

/// `ev` with the vendor events already read behind it, or read after one
/// turn of the runtime each with `turns` (see [`READ_AHEAD`]).
async fn read_ahead(ev: SseEvent, events: &mut Watched, turns: bool) -> Ahead {
    let mut batch = vec![ev];
    let mut yielded = false;
    while batch.len() < READ_AHEAD {
        match events.ready("the stream broke") {
            None if turns && !yielded => {
                yielded = true;
                tokio::task::yield_now().await;
            }
            None => break,
            Some(Ok(Some(ev))) => {
                yielded = false;
                batch.push(ev);
            }
            Some(Ok(None)) => return Ahead::Ended(batch),
            Some(Err(e)) => return Ahead::Push(batch, Some(e)),
        }
    }
    Ahead::Push(batch, None)
}

/// `idle` after `from`; a timeout too long to add is as good as none (a
/// year on).
fn deadline(from: tokio::time::Instant, idle: Duration) -> tokio::time::Instant {
    const YEAR: Duration = Duration::from_secs(365 * 24 * 3600);
    from.checked_add(idle)
        .or_else(|| from.checked_add(YEAR))
        .unwrap_or(from)
}

fn untranslatable(e: AdapterError) -> StartFailed {
    match e {
        AdapterError::Plugin(PluginError::UpstreamFailed(_)) => StartFailed::Refused(e),
        e => StartFailed::Untranslatable(e),
    }
}

/// Commits the stream: starts the relay task and returns the response.
///
/// The held first events are the body's first bytes, counted here as
/// handed to the connection: hyper writes them with the answer's head, in
/// one write, as soon as the handler returns, without waiting for the relay
/// task to be scheduled and to pass them through the channel (a task's
/// start and a hand-over, run cold, on the way to the first token). The
/// relay task sends the rest. A body dropped before it gave them out (the
/// client left before the stream committed) handed nothing over, and the
/// relay task bills it so.
pub(crate) fn respond(
    mut opened: Opened,
    charge: Charge,
    protocol: &'static ClientProtocol,
    wants_usage: bool,
) -> Response {
    // A small buffer: back-pressure from a slow client reaches the vendor.
    let (tx, rx) = mpsc::channel::<Bytes>(32);
    let mut relayed = Relayed::new(protocol.protocol, charge.encoding());
    let first = held_bytes(std::mem::take(&mut opened.first), &mut relayed);
    // An empty chunk is not sent: the first events may all be empty.
    let first = (!first.is_empty()).then_some(first);
    let handed = Arc::new(AtomicBool::new(first.is_none()));
    let client = Client {
        tx,
        relayed,
        first_handed: handed.clone(),
        gone: false,
    };
    let request_id = charge.request_id().to_string();
    // Boxed where it is made, as the call's own future is (`api::text`):
    // the pump's future is some 5 KB, which the scope and the task would
    // otherwise each copy on the way to the first token.
    let pump = Box::pin(pump(opened, charge, protocol, wants_usage, client));
    tokio::spawn(REQUEST_ID.scope(request_id, pump));
    let body = ClientBody { first, handed, rx };
    let mut resp = Response::new(Body::from_stream(body));
    sse_headers(&mut resp);
    resp
}

/// A stream's answer body: the held first events, then what the relay task
/// sends, until it ends.
struct ClientBody {
    first: Option<Bytes>,
    /// Set once `first` is given out (set from the start when there is
    /// none).
    handed: Arc<AtomicBool>,
    rx: mpsc::Receiver<Bytes>,
}

impl Stream for ClientBody {
    type Item = Result<Bytes, std::convert::Infallible>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        if let Some(first) = self.first.take() {
            self.handed.store(true, Ordering::Release);
            return Poll::Ready(Some(Ok(first)));
        }
        self.rx.poll_recv(cx).map(|bytes| bytes.map(Ok))
    }
}

/// The held first events as the wire's bytes, their text counted in
/// `relayed` (a spliced one's as the splice read it).
fn held_bytes(held: Vec<Held>, relayed: &mut Relayed) -> Bytes {
    let (events, reads): (Vec<SseEvent>, Vec<Option<String>>) =
        held.into_iter().map(|h| (h.event, h.read)).unzip();
    for (ev, read) in events.iter().zip(&reads) {
        match read {
            Some(text) => relayed.observe_read(&ev.data, text),
            None => relayed.observe(std::slice::from_ref(ev)),
        }
    }
    encode(&events)
}

fn encode(events: &[SseEvent]) -> Bytes {
    let mut out = Vec::with_capacity(encoded_size(events));
    for ev in events {
        sse::encode(ev.event.as_deref(), &ev.data, &mut out);
    }
    Bytes::from(out)
}

/// The wire size of `events` when each is one line of data
/// ([`sse::encoded_len`]): the buffer is made that size at once, and a
/// buffer filled exactly becomes the frame's `Bytes` without another
/// allocation.
fn encoded_size(events: &[SseEvent]) -> usize {
    events
        .iter()
        .map(|ev| sse::encoded_len(ev.event.as_deref(), &ev.data))
        .sum()
}

/// Sends to the client while it listens, counting the text that went out.
struct Client {
    tx: mpsc::Sender<Bytes>,
    /// The text handed to the connection, the first events' included.
    relayed: Relayed,
    /// Whether the body gave out the first events; nothing else goes out
    /// before them.
    first_handed: Arc<AtomicBool>,
    gone: bool,
}

impl Client {
    /// The output tokens of the text handed to the connection: none when
    /// the body never gave out the first events.
    fn output_tokens(&self) -> u64 {
        if self.first_handed.load(Ordering::Acquire) {
            self.relayed.output_tokens()
        } else {
            0
        }
    }

    /// Hands `events` to the connection (waiting while it is full: a slow
    /// reader slows the vendor down) and counts their text; false once the
    /// client is gone.
    async fn send(&mut self, events: &[SseEvent]) -> bool {
        let sent = self.deliver(events).await;
        if sent {
            self.relayed.observe(events);
        }
        sent
    }

    /// Hands a spliced event to the connection and counts `text`, its
    /// generated text as the splice read it; false once the client is gone.
    async fn send_read(&mut self, ev: &SseEvent, text: &str) -> bool {
        let sent = self.deliver(std::slice::from_ref(ev)).await;
        if sent {
            self.relayed.observe_read(&ev.data, text);
        }
        sent
    }

    /// Hands `events` to the connection without counting them.
    async fn deliver(&mut self, events: &[SseEvent]) -> bool {
        if self.gone {
            return false;
        }
        let bytes = encode(events);
        if bytes.is_empty() {
            return true;
        }
        if self.tx.send(bytes).await.is_err() {
            self.gone = true;
            return false;
        }
        true
    }
}

/// Relays the stream after its first events (which `respond` gave the
/// body), then ends and settles it.
async fn pump(
    opened: Opened,
    charge: Charge,
    protocol: &'static ClientProtocol,
    wants_usage: bool,
    mut client: Client,
) {
    let Opened {
        mut session,
        translator,
        mut events,
        mut splice,
        // Given to the body by `respond`.
        first: _,
        ended,
    } = opened;
    // The text of a spliced chunk, read by the splice.
    let mut spliced_text = String::new();
    // After a trap or deadline the instance is unusable; don't call it again.
    let mut guest_broken = false;
    // A client that leaves while the vendor is quiet is noticed at once,
    // not at the next event. One wait serves the whole stream: a wait made
    // for each event would join and leave the channel's list of waiters
    // every time.
    //
    // The loop ends with the failure, if one ended it (else the vendor's
    // stream ended, or the client went: `client.gone`). `rest` is what
    // came with the stream's end, for `finish`.
    let mut rest: Vec<SseEvent> = Vec::new();
    let watcher = client.tx.clone();
    let mut failure: Option<ApiError> = {
        let mut left = std::pin::pin!(watcher.closed());
        loop {
            if ended.is_some() || client.gone {
                break None;
            }
            let next = tokio::select! {
                _ = &mut left => {
                    client.gone = true;
                    break None;
                }
                next = events.next("the stream broke") => next,
            };
            let ev = match next {
                Err(e) => break Some(e),
                Ok(None) => break None,
                Ok(Some(ev)) => ev,
            };
            if let Some(spliced) = splice
                .as_mut()
                .and_then(|s| s.relay(&ev, &mut spliced_text))
            {
                let sent = client.send_read(&spliced, &spliced_text).await;
                spliced_text.clear();
                if !sent {
                    break None;
                }
                continue;
            }
            let (batch, broke) = match read_ahead(ev, &mut events, splice.is_some()).await {
                Ahead::Ended(batch) => {
                    rest = batch;
                    break None;
                }
                Ahead::Push(batch, broke) => (batch, broke),
            };
            let mut failed = None;
            for ev in &batch {
                match session.push(translator, ev).await {
                    Ok(out) => {
                        if !client.send(&out).await {
                            break;
                        }
                    }
                    Err(e) => {
                        guest_broken = matches!(e, AdapterError::Guest(_));
                        failed = Some(e.into());
                        break;
                    }
                }
            }
            if failed.is_some() || client.gone {
                break failed;
            }
            if broke.is_some() {
                break broke;
            }
        }
    };
    drop(watcher);
    // The vendor connection closes here: a vendor whose client is gone
    // stops generating, and stops charging.
    drop(events);
    // Ask the translator for the usage even after a failure: a vendor that
    // reported usage before breaking is billed for it.
    let mut usage = None;
    let mut closing: Vec<SseEvent> = Vec::new();
    let end = match ended {
        Some(end) => Some(Ok(end)),
        None if guest_broken => None,
        None => Some(session.finish(translator, &rest).await),
    };
    let guest_ok = matches!(end, Some(Ok(_)));
    if let Some(end) = end {
        match end {
            Ok(end) => {
                usage = end.usage;
                // The last events' client events go out as their pushes'
                // would have, then their failure, if one failed.
                client.send(&end.rest_events).await;
                if let Some(e) = end.rest_failed {
                    failure = failure.or(Some(AdapterError::Plugin(e).into()));
                }
                if failure.is_none() && !client.gone {
                    if end.complete {
                        closing = end.events;
                    } else {
                        failure = Some(ApiError::UpstreamIncomplete);
                    }
                }
            }
            Err(e) if failure.is_none() && !client.gone => failure = Some(e.into()),
            Err(_) => {}
        }
    }
    // The guest instance goes back now, not when the settlement is done:
    // to its adapter's warm instances if every call on it succeeded
    // (`finish` has dropped the translator).
    if guest_ok {
        session.recycle();
    } else {
        drop(session);
    }
    if client.gone {
        let output = client.output_tokens();
        charge
            .settle_counted(
                usage,
                output,
                200,
                "the client went away (disconnected, or stopped reading) before the end of \
                 the stream; billed for what was relayed"
                    .into(),
            )
            .await;
        return;
    }
    let status = match &failure {
        Some(e) => {
            let ev = e.stream_event(protocol.envelope, charge.request_id());
            closing = vec![SseEvent {
                event: ev.event.map(str::to_string),
                data: ev.data,
            }];
            e.status().as_u16()
        }
        None => 200,
    };
    // Settle before the client sees the end of the stream: a call the client
    // saw complete must never be lost to a crash in between. The closing
    // events' text (a held last chunk) is counted with the rest.
    client.relayed.observe(&closing);
    let vendor_silent = usage.is_none();
    let vendor_counted = usage.as_ref().is_some_and(|u| !u.is_empty());
    match failure {
        // A stream cut after part of the answer went out is billed for that
        // part, as when the client leaves; before any of it, only for what
        // the vendor reported.
        Some(e) if client.relayed.any() => {
            let output = client.relayed.output_tokens();
            charge
                .settle_counted(usage, output, status, e.to_string())
                .await;
        }
        Some(e) => {
            charge
                .settle(usage.as_ref(), status, Some(e.to_string()))
                .await
        }
        None if vendor_counted => charge.settle(usage.as_ref(), status, None).await,
        // A whole answer from a vendor that reports no usage: the gateway
        // counts it, and a client that asked for the usage chunk gets one.
        None => {
            let output = client.relayed.output_tokens();
            let billed = charge
                .settle_counted(
                    None,
                    output,
                    status,
                    "the vendor reported no usage; counted by the gateway".into(),
                )
                .await;
            // A vendor that sent a usage report of zeros has had it relayed.
            if wants_usage && vendor_silent {
                if let Some(chunk) = client.relayed.usage_chunk(&billed) {
                    let at = closing
                        .iter()
                        .position(|ev| ev.data == "[DONE]")
                        .unwrap_or(closing.len());
                    closing.insert(at, chunk);
                }
            }
        }
    }
    client.deliver(&closing).await;
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures_util::stream;
    use std::task::Poll;

    #[test]
    fn a_frame_is_sized_exactly_for_one_line_events() {
        let ev = |event: Option<&str>, data: &str| SseEvent {
            event: event.map(str::to_string),
            data: data.to_string(),
        };
        let one_line = [
            ev(None, r#"{"choices":[{"delta":{"content":"hi"}}]}"#),
            ev(
                Some("content_block_delta"),
                r#"{"type":"content_block_delta"}"#,
            ),
            ev(None, "[DONE]"),
        ];
        let frame = encode(&one_line);
        assert_eq!(frame.len(), encoded_size(&one_line));
        assert_eq!(
            &frame[..],
            b"data: {\"choices\":[{\"delta\":{\"content\":\"hi\"}}]}\n\n\
              event: content_block_delta\ndata: {\"type\":\"content_block_delta\"}\n\n\
              data: [DONE]\n\n"
        );
        // Data of several lines still goes out whole, a line each.
        let lines = [ev(None, "a\r\nb\nc")];
        assert_eq!(&encode(&lines)[..], b"data: a\ndata: b\ndata: c\n\n");
    }

    fn event(data: &str) -> sse::Event {
        sse::Event {
            event: None,
            data: data.into(),
        }
    }

    /// A vendor stream that is quiet at its first poll (asking to be polled
    /// again: the connection's task has the event but has not handed it
    /// over), then sends one event with `data`, then ends when `ends`, else
    /// says nothing more.
    fn one_event_after_a_pause(data: &'static str, ends: bool) -> VendorEvents {
        let mut polls = 0;
        Box::pin(stream::poll_fn(move |cx| {
            polls += 1;
            match polls {
                1 => {
                    cx.waker().wake_by_ref();
                    Poll::Pending
                }
                2 => Poll::Ready(Some(Ok(event(data)))),
                _ if ends => Poll::Ready(None),
                _ => Poll::Pending,
            }
        }))
    }

    fn runtime() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .unwrap()
    }

    #[test]
    fn a_vendor_quiet_for_the_idle_timeout_fails_the_wait() {
        runtime().block_on(async {
            let mut watched = Watched::new(Box::pin(stream::pending()), Duration::ZERO);
            match watched.next("broke").await {
                Err(ApiError::UpstreamTimeout(0)) => {}
                other => panic!("expected the stall, got {other:?}"),
            }
        });
    }

    #[test]
    fn a_timer_due_from_an_earlier_wait_is_set_again_from_this_one() {
        runtime().block_on(async {
            let idle = Duration::from_secs(3600);
            let mut watched = Watched::new(one_event_after_a_pause("{}", false), idle);
            // The deadline of an earlier wait is long gone (a slow client
            // took the time since): the timer fires at once, but this wait
            // has just begun, so it is set again and the event comes.
            let now = tokio::time::Instant::now();
            let long_ago = now.checked_sub(Duration::from_secs(10)).unwrap();
            watched.timer.as_mut().reset(long_ago);
            let ev = watched.next("broke").await.unwrap().unwrap();
            assert_eq!(ev.data, "{}");
            let deadline = watched.timer.deadline();
            assert!(
                deadline >= now + idle,
                "set again for this wait's own deadline"
            );
            assert!(deadline <= tokio::time::Instant::now() + idle);
        });
    }

    fn datas(events: &[SseEvent]) -> Vec<&str> {
        events.iter().map(|e| e.data.as_str()).collect()
    }

    fn sse_event(data: &str) -> SseEvent {
        SseEvent {
            event: None,
            data: data.into(),
        }
    }

    fn watched(items: Vec<Result<sse::Event, sse::SseError>>, then: VendorEvents) -> Watched {
        Watched::new(
            Box::pin(stream::iter(items).chain(then)),
            Duration::from_secs(60),
        )
    }

    #[test]
    fn events_read_with_the_end_all_go_to_finish() {
        runtime().block_on(async {
            let mut w = watched(
                vec![Ok(event("u")), Ok(event("[DONE]"))],
                Box::pin(stream::empty()),
            );
            match read_ahead(sse_event("f"), &mut w, false).await {
                Ahead::Ended(rest) => assert_eq!(datas(&rest), ["f", "u", "[DONE]"]),
                Ahead::Push(..) => panic!("the end came with them"),
            }
        });
    }

    #[test]
    fn events_read_before_a_wait_are_pushed_without_waiting() {
        runtime().block_on(async {
            let mut w = watched(vec![Ok(event("a"))], Box::pin(stream::pending()));
            match read_ahead(sse_event("f"), &mut w, false).await {
                Ahead::Push(batch, None) => assert_eq!(datas(&batch), ["f", "a"]),
                _ => panic!("more is to come"),
            }
        });
    }

    #[test]
    fn a_turn_lets_the_rest_of_a_spliced_stream_come_to_finish() {
        runtime().block_on(async {
            let mut w = watched(Vec::new(), one_event_after_a_pause("[DONE]", true));
            match read_ahead(sse_event("f"), &mut w, true).await {
                Ahead::Ended(rest) => assert_eq!(datas(&rest), ["f", "[DONE]"]),
                Ahead::Push(..) => panic!("the turn brought the rest and the end"),
            }
            // Without the turn the event goes on alone.
            let mut w = watched(Vec::new(), one_event_after_a_pause("[DONE]", true));
            match read_ahead(sse_event("f"), &mut w, false).await {
                Ahead::Push(batch, None) => assert_eq!(datas(&batch), ["f"]),
                _ => panic!("nothing was read yet"),
            }
        });
    }

    #[test]
    fn a_break_read_ahead_comes_after_the_events_before_it() {
        runtime().block_on(async {
            let broken = Err(sse::SseError::TooLarge(1));
            let mut w = watched(vec![Ok(event("a")), broken], Box::pin(stream::empty()));
            match read_ahead(sse_event("f"), &mut w, false).await {
                Ahead::Push(batch, Some(ApiError::UpstreamUnreachable(why))) => {
                    assert_eq!(datas(&batch), ["f", "a"]);
                    assert!(why.starts_with("the stream broke"), "{why}");
                }
                _ => panic!("the events, then the break"),
            }
        });
    }

    #[test]
    fn reading_ahead_stops_at_its_bound_and_leaves_the_rest() {
        runtime().block_on(async {
            let many = (0..READ_AHEAD + 3)
                .map(|i| Ok(event(&i.to_string())))
                .collect();
            let mut w = watched(many, Box::pin(stream::empty()));
            match read_ahead(sse_event("f"), &mut w, false).await {
                Ahead::Push(batch, None) => assert_eq!(batch.len(), READ_AHEAD),
                _ => panic!("bounded"),
            }
            // The events past the bound are the stream's next.
            let next = w.next("broke").await.unwrap().unwrap();
            assert_eq!(next.data, (READ_AHEAD - 1).to_string());
        });
    }

    #[test]
    fn a_timeout_too_long_to_add_is_a_year() {
        let now = tokio::time::Instant::now();
        assert_eq!(
            deadline(now, Duration::from_secs(5)),
            now + Duration::from_secs(5)
        );
        assert!(deadline(now, Duration::MAX) > now + Duration::from_secs(364 * 24 * 3600));
    }
}
