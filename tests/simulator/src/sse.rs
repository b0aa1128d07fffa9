//! Laying SSE events out on the wire and feeding them to hyper one body
//! chunk at a time, optionally ending in a broken connection.

use std::collections::VecDeque;
use std::io;
use std::time::Duration;

use axum::body::Body;
use bytes::Bytes;
use tokio_util::sync::CancellationToken;

use crate::faults::Framing;

/// One event to send: an optional `event:` name and the data.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Out {
    pub event: Option<String>,
    pub data: String,
}

impl Out {
    pub fn data(data: impl Into<String>) -> Self {
        Self {
            event: None,
            data: data.into(),
        }
    }

    pub fn named(event: &str, data: impl Into<String>) -> Self {
        Self {
            event: Some(event.to_owned()),
            data: data.into(),
        }
    }
}

/// Frames each payload as `data: <payload>` plus a blank line (unnamed
/// events; the tests' shorthand for [`frame_events`]).
#[cfg(test)]
pub fn frame(payloads: &[String], framing: Framing) -> Vec<Bytes> {
    let events: Vec<Out> = payloads.iter().map(|p| Out::data(p.clone())).collect();
    frame_events(&events, framing)
}

/// Frames each event as an optional `event: <name>` line, `data: <data>` and
/// a blank line. Every event (or, with `fragment`, every third of one)
/// becomes its own body chunk.
pub fn frame_events(events: &[Out], framing: Framing) -> Vec<Bytes> {
    frame_indexed(events, framing)
        .into_iter()
        .map(|(_, piece)| piece)
        .collect()
}

/// [`frame_events`], each piece with the index of the event it belongs to
/// (a `: keep-alive` comment belongs to the event it precedes).
pub fn frame_indexed(events: &[Out], framing: Framing) -> Vec<(usize, Bytes)> {
    let nl = if framing.crlf { "\r\n" } else { "\n" };
    let mut out = Vec::with_capacity(events.len() * 3);
    for (i, ev) in events.iter().enumerate() {
        if framing.comments && i > 0 {
            out.push((i, Bytes::from(format!(": keep-alive{nl}{nl}"))));
        }
        let name = ev
            .event
            .as_deref()
            .map(|n| format!("event: {n}{nl}"))
            .unwrap_or_default();
        let event = Bytes::from(format!("{name}data: {}{nl}{nl}", ev.data));
        if framing.fragment {
            // Byte offsets, not char boundaries: a gateway must cope with a
            // read that ends inside a UTF-8 sequence too.
            let n = event.len();
            for (a, b) in [(0, n / 3), (n / 3, 2 * n / 3), (2 * n / 3, n)] {
                out.push((i, event.slice(a..b)));
            }
        } else {
            out.push((i, event));
        }
    }
    out
}

/// A streaming body that hands hyper one piece per poll cycle, so pieces
/// leave as separate writes instead of being coalesced, then either ends
/// or (when `cut`) fails, which makes hyper abort the connection.
pub fn paced(
    pieces: Vec<Bytes>,
    delay: Option<Duration>,
    cut: bool,
    shutdown: CancellationToken,
) -> Body {
    paced_each(
        pieces.into_iter().map(|p| (delay, p)).collect(),
        delay,
        cut,
        shutdown,
    )
}

/// [`paced`] with a pause of its own before each piece (`None`: just a
/// yield; the first piece's is ignored) and `end_pause` before the end.
pub fn paced_each(
    pieces: Vec<(Option<Duration>, Bytes)>,
    end_pause: Option<Duration>,
    cut: bool,
    shutdown: CancellationToken,
) -> Body {
    let pacer = Pacer {
        pieces: pieces.into(),
        end_pause,
        cut,
        started: false,
        done: false,
        shutdown,
    };
    Body::from_stream(futures_util::stream::unfold(pacer, |mut p| async move {
        if p.done {
            return None;
        }
        if p.started {
            let pause = p.pieces.front().map_or(p.end_pause, |(d, _)| *d);
            if !p.pause(pause).await {
                p.done = true;
                return Some((Err(aborted("simulator shutting down")), p));
            }
        }
        p.started = true;
        match p.pieces.pop_front() {
            Some((_, piece)) => Some((Ok(piece), p)),
            None if p.cut => {
                // Give hyper time to put what was sent on the wire before
                // the connection is torn down.
                tokio::time::sleep(Duration::from_millis(10)).await;
                p.done = true;
                Some((Err(aborted("simulated connection cut")), p))
            }
            None => None,
        }
    }))
}

struct Pacer {
    /// Each piece with the pause before it.
    pieces: VecDeque<(Option<Duration>, Bytes)>,
    /// The pause before the end (or the cut).
    end_pause: Option<Duration>,
    cut: bool,
    started: bool,
    done: bool,
    shutdown: CancellationToken,
}

impl Pacer {
    /// Returns false when the simulator is shutting down.
    async fn pause(&self, delay: Option<Duration>) -> bool {
        match delay {
            Some(d) => tokio::select! {
                _ = tokio::time::sleep(d) => true,
                _ = self.shutdown.cancelled() => false,
            },
            // Returning Pending once makes hyper flush what it holds.
            None => {
                tokio::task::yield_now().await;
                !self.shutdown.is_cancelled()
            }
        }
    }
}

fn aborted(why: &'static str) -> io::Error {
    io::Error::new(io::ErrorKind::ConnectionAborted, why)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn joined(pieces: &[Bytes]) -> String {
        pieces
            .iter()
            .map(|b| String::from_utf8_lossy(b).into_owned())
            .collect()
    }

    #[test]
    fn plain_framing() {
        let p = frame(&["{}".into(), "[DONE]".into()], Framing::default());
        assert_eq!(p.len(), 2);
        assert_eq!(joined(&p), "data: {}\n\ndata: [DONE]\n\n");
    }

    #[test]
    fn indexed_pieces_name_their_event() {
        let framing = Framing {
            fragment: true,
            comments: true,
            ..Framing::default()
        };
        let events = [Out::data("a"), Out::named("e", "b")];
        let idx: Vec<usize> = frame_indexed(&events, framing)
            .iter()
            .map(|(i, _)| *i)
            .collect();
        assert_eq!(
            idx,
            [0, 0, 0, 1, 1, 1, 1],
            "3 thirds, then comment + 3 thirds"
        );
        assert_eq!(
            frame_events(&events, framing),
            frame_indexed(&events, framing)
                .into_iter()
                .map(|(_, p)| p)
                .collect::<Vec<_>>()
        );
    }

    #[test]
    fn crlf_comments_and_fragments() {
        let framing = Framing {
            crlf: true,
            fragment: true,
            comments: true,
            whole: false,
        };
        let p = frame(&["{\"a\":1}".into(), "[DONE]".into()], framing);
        assert_eq!(p.len(), 3 + 1 + 3);
        assert_eq!(
            joined(&p),
            "data: {\"a\":1}\r\n\r\n: keep-alive\r\n\r\ndata: [DONE]\r\n\r\n"
        );
    }
}
