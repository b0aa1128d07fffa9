//! Server-sent events: parsing the vendor's byte stream into whole events for
//! the adapter, and writing the adapter's events to the client.
//!
//! Parsing uses the `eventsource-stream` crate (the WHATWG algorithm: events
//! split across reads, LF / CRLF / CR line ends, comments, multi-line data).
//! On top of it the host caps how many bytes may arrive without completing an
//! event, so a vendor that never sends a blank line cannot make the gateway
//! buffer without bound, and strips a leading byte-order mark itself: the
//! crate slices one byte off the three-byte character and panics.

use bytes::Bytes;
use eventsource_stream::{EventStreamError, Eventsource};
use futures_util::{Stream, StreamExt};
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};

/// Default cap on bytes received without completing an event.
pub const DEFAULT_MAX_PENDING: usize = 4 * 1024 * 1024;

/// One event, with its `data:` lines joined by `\n`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Event {
    /// `None` for the default `message` type.
    pub event: Option<String>,
    pub data: String,
}

#[derive(Debug, thiserror::Error)]
pub enum SseError {
    #[error("an event grew past {0} bytes without ending")]
    TooLarge(usize),
    #[error("the stream is not valid UTF-8")]
    Utf8,
    #[error("the stream is not valid server-sent events: {0}")]
    Syntax(String),
    #[error("reading the stream failed: {0}")]
    Transport(String),
}

/// Errors of the byte stream under the parser.
#[derive(Debug)]
enum FeedError {
    TooLarge(usize),
    Transport(String),
}

/// Counts bytes handed to the parser since the last event it produced, and
/// hands it the stream's start without a byte-order mark.
struct Counted<S> {
    inner: S,
    pending: Arc<AtomicUsize>,
    max: usize,
    /// The stream's first bytes while they may still be the start of a
    /// byte-order mark; `None` once the parser has them.
    lead: Option<Vec<u8>>,
    ended: bool,
}

const BOM: &[u8] = "\u{feff}".as_bytes();

/// What the parser is handed first: a line end (a blank line completes no
/// event), then the stream's first bytes without one leading byte-order
/// mark (the SSE algorithm drops it). Starting with the line end, the
/// parser never meets a mark at the start, where it would panic.
fn start(lead: &[u8]) -> Bytes {
    let rest = lead.strip_prefix(BOM).unwrap_or(lead);
    let mut out = Vec::with_capacity(rest.len() + 1);
    out.push(b'\n');
    out.extend_from_slice(rest);
    Bytes::from(out)
}

impl<S, E> Stream for Counted<S>
where
    S: Stream<Item = Result<Bytes, E>> + Unpin,
    E: std::fmt::Display,
{
    type Item = Result<Bytes, FeedError>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        if self.ended {
            return Poll::Ready(None);
        }
        match Pin::new(&mut self.inner).poll_next(cx) {
            Poll::Ready(Some(Ok(chunk))) => {
                let now = self.pending.fetch_add(chunk.len(), Ordering::Relaxed) + chunk.len();
                if now > self.max {
                    return Poll::Ready(Some(Err(FeedError::TooLarge(self.max))));
                }
                let Some(mut lead) = self.lead.take() else {
                    return Poll::Ready(Some(Ok(chunk)));
                };
                lead.extend_from_slice(&chunk);
                if lead.len() < BOM.len() && BOM.starts_with(&lead) {
                    // Too short to tell yet.
                    self.lead = Some(lead);
                    return Poll::Ready(Some(Ok(Bytes::new())));
                }
                Poll::Ready(Some(Ok(start(&lead))))
            }
            Poll::Ready(Some(Err(e))) => {
                Poll::Ready(Some(Err(FeedError::Transport(e.to_string()))))
            }
            Poll::Ready(None) => {
                self.ended = true;
                match self.lead.take() {
                    // The stream ended inside what could have been a mark.
                    Some(lead) if !lead.is_empty() => Poll::Ready(Some(Ok(start(&lead)))),
                    _ => Poll::Ready(None),
                }
            }
            Poll::Pending => Poll::Pending,
        }
    }
}

/// Parses a byte stream into events. Ends with the byte stream; an
/// unfinished event at the end is dropped, as the SSE algorithm says.
pub fn events<S, E>(bytes: S, max_pending: usize) -> impl Stream<Item = Result<Event, SseError>>
where
    S: Stream<Item = Result<Bytes, E>> + Unpin,
    E: std::fmt::Display,
{
    let pending = Arc::new(AtomicUsize::new(0));
    let counted = Counted {
        inner: bytes,
        pending: pending.clone(),
        max: max_pending,
        lead: Some(Vec::new()),
        ended: false,
    };
    let parsed = counted.eventsource().map(move |item| match item {
        Ok(ev) => {
            // Bytes of this event are spent; what may still be buffered
            // belongs to the next one, bounded by one read.
            pending.store(0, Ordering::Relaxed);
            Ok(Event {
                event: (ev.event != "message").then_some(ev.event),
                data: ev.data,
            })
        }
        Err(EventStreamError::Transport(FeedError::TooLarge(max))) => Err(SseError::TooLarge(max)),
        Err(EventStreamError::Transport(FeedError::Transport(t))) => Err(SseError::Transport(t)),
        Err(EventStreamError::Utf8(_)) => Err(SseError::Utf8),
        Err(EventStreamError::Parser(p)) => Err(SseError::Syntax(p.to_string())),
    });
    // The first error ends the stream: nothing after it can be trusted.
    parsed.scan(false, |failed, item| {
        let out = if *failed { None } else { Some(item) };
        if matches!(out, Some(Err(_))) {
            *failed = true;
        }
        futures_util::future::ready(out)
    })
}

/// Writes one event in the wire format: an optional `event:` line, one
/// `data:` line per line of data (any of CRLF, CR, LF splits lines), a blank
/// line.
pub fn encode(event: Option<&str>, data: &str, out: &mut Vec<u8>) {
    if let Some(name) = event {
        out.extend_from_slice(b"event: ");
        out.extend_from_slice(name.as_bytes());
        out.push(b'\n');
    }
    let normalised;
    let data = if data.contains('\r') {
        normalised = data.replace("\r\n", "\n").replace('\r', "\n");
        normalised.as_str()
    } else {
        data
    };
    for line in data.split('\n') {
        out.extend_from_slice(b"data: ");
        out.extend_from_slice(line.as_bytes());
        out.push(b'\n');
    }
    out.push(b'\n');
}

/// What [`encode`] writes for an event whose data is one line (`event: `,
/// the name, a line end; `data: `, the data, two line ends): exact then, and
/// short of it for data of several lines. A caller sizes its buffer with it
/// so the buffer is made once rather than grown piece by piece.
pub fn encoded_len(event: Option<&str>, data: &str) -> usize {
    data.len() + 8 + event.map_or(0, |name| name.len() + 8)
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures_util::stream;

    fn parse(chunks: &[&[u8]], max: usize) -> Vec<Result<Event, String>> {
        let s = stream::iter(
            chunks
                .iter()
                .map(|c| Ok::<_, std::io::Error>(Bytes::copy_from_slice(c)))
                .collect::<Vec<_>>(),
        );
        let evs = events(s, max);
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        rt.block_on(evs.map(|r| r.map_err(|e| e.to_string())).collect())
    }

    fn data(e: &str) -> Result<Event, String> {
        Ok(Event {
            event: None,
            data: e.into(),
        })
    }

    #[test]
    fn whole_events() {
        assert_eq!(
            parse(&[b"data: a\n\ndata: b\n\n"], 1024),
            vec![data("a"), data("b")]
        );
    }

    #[test]
    fn events_split_across_reads_anywhere() {
        let wire = b"event: delta\ndata: {\"x\":1}\n\ndata: [DONE]\n\n";
        for cut in 1..wire.len() {
            let got = parse(&[&wire[..cut], &wire[cut..]], 1024);
            assert_eq!(
                got,
                vec![
                    Ok(Event {
                        event: Some("delta".into()),
                        data: "{\"x\":1}".into()
                    }),
                    data("[DONE]")
                ],
                "cut at {cut}"
            );
        }
    }

    #[test]
    fn crlf_and_cr_line_ends_even_when_split_between_cr_and_lf() {
        assert_eq!(
            parse(&[b"data: a\r\n\r\ndata: b\r\rdata: c\n\n"], 1024),
            vec![data("a"), data("b"), data("c")]
        );
        assert_eq!(
            parse(&[b"data: a\r", b"\n\r", b"\n"], 1024),
            vec![data("a")]
        );
    }

    #[test]
    fn comments_and_unknown_fields_are_ignored() {
        assert_eq!(
            parse(
                &[b": keep-alive\n\nretry: 10\nid: 7\ndata: x\n: mid\n\n"],
                1024
            ),
            vec![data("x")]
        );
    }

    #[test]
    fn multi_line_data_is_joined_with_lf() {
        assert_eq!(
            parse(&[b"data: a\ndata: b\ndata:c\n\n"], 1024),
            vec![data("a\nb\nc")]
        );
    }

    #[test]
    fn unfinished_event_at_end_is_dropped() {
        assert_eq!(parse(&[b"data: a\n\ndata: partial"], 1024), vec![data("a")]);
    }

    #[test]
    fn an_event_that_never_ends_hits_the_cap() {
        let line = [b'x'; 100];
        let mut chunks: Vec<&[u8]> = vec![b"data: "];
        for _ in 0..20 {
            chunks.push(&line);
        }
        let got = parse(&chunks, 1000);
        assert_eq!(got.len(), 1);
        assert!(got[0].as_ref().unwrap_err().contains("1000 bytes"));
    }

    #[test]
    fn the_cap_counts_per_event_not_per_stream() {
        let ev = b"data: 0123456789012345678901234567890123456789\n\n";
        let chunks: Vec<&[u8]> = (0..100).map(|_| &ev[..]).collect();
        assert_eq!(parse(&chunks, 200).len(), 100);
    }

    #[test]
    fn utf8_split_inside_a_character() {
        let wire = "data: héllo\n\n".as_bytes();
        let i = wire.iter().position(|b| *b == 0xc3).unwrap() + 1;
        assert_eq!(parse(&[&wire[..i], &wire[i..]], 1024), vec![data("héllo")]);
    }

    #[test]
    fn one_leading_byte_order_mark_is_dropped_even_split_across_reads() {
        let wire = "\u{feff}data: a\n\n".as_bytes();
        for cut in 0..4 {
            assert_eq!(parse(&[&wire[..cut], &wire[cut..]], 1024), vec![data("a")]);
        }
        // A second mark is part of the first line's field name.
        assert_eq!(
            parse(&["\u{feff}\u{feff}data: a\n\ndata: b\n\n".as_bytes()], 1024),
            vec![data("b")]
        );
        assert_eq!(parse(&["\u{feff}".as_bytes()], 1024), vec![]);
        assert_eq!(
            parse(&[b"\xef\xbb"], 1024),
            vec![Err(SseError::Utf8.to_string())]
        );
    }

    #[test]
    fn encode_splits_lines() {
        let mut out = Vec::new();
        encode(Some("message_delta"), "a\r\nb", &mut out);
        encode(None, "[DONE]", &mut out);
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "event: message_delta\ndata: a\ndata: b\n\ndata: [DONE]\n\n"
        );
    }
}
