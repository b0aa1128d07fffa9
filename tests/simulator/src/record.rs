//! Remembering what the simulator received, so tests can check what the
//! gateway actually forwarded (injected keys, rewritten bodies, ...).

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use axum::body::Body;
use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use bytes::Bytes;

use crate::errors::{ApiError, Dialect};
use crate::faults::lock;
use crate::SimState;

/// How many of the newest requests are kept by default
/// ([`crate::SimOptions::keep_requests`]); long demos would otherwise grow
/// memory without bound.
pub const MAX_RECORDED: usize = 10_000;

/// Bodies larger than this are refused; nothing the gateway forwards to a
/// chat vendor comes close.
pub const MAX_BODY: usize = 32 * 1024 * 1024;

/// The largest upload accepted on a [streamed upload](STREAMED_UPLOADS)
/// route.
pub const MAX_UPLOAD: usize = 128 * 1024 * 1024;

/// Routes whose body is a (possibly large) upload that their handler reads
/// as a stream: the middleware records them with an empty body, never
/// buffering it, and the handler replaces that with a summary of what it
/// read ([`Recorder::set_body`]), so a 100 MB audio file is never held in
/// memory, nor kept in the record.
pub const STREAMED_UPLOADS: [&str; 1] = ["/v1/audio/transcriptions"];

/// A request extension: the request's sequence number in the record, for
/// handlers that amend their record.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RecordSeq(pub u64);

/// One request as received, and the usage the simulator reported for it.
#[derive(Clone, Debug)]
pub struct Recorded {
    pub method: String,
    /// Path and query, e.g. `/v1/chat/completions?x=1`.
    pub path: String,
    /// Header names are lower-case, in arrival order; repeats are kept.
    pub headers: Vec<(String, String)>,
    pub body: Bytes,
    /// The usage the answer reported, in the vendor's own shape (OpenAI
    /// `usage`, Anthropic's final `usage`, Gemini `usageMetadata`); `None`
    /// for errors and answers still in flight.
    pub usage: Option<serde_json::Value>,
}

/// Set by a handler on its response: the usage it reported, for the record.
#[derive(Clone, Debug)]
pub struct ReportedUsage(pub serde_json::Value);

impl Recorded {
    /// The first value of header `name` (case-insensitive).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// The body parsed as JSON, if it is JSON.
    pub fn json(&self) -> Option<serde_json::Value> {
        serde_json::from_slice(&self.body).ok()
    }
}

pub struct Recorder {
    /// (sequence number, request), oldest first.
    list: Mutex<VecDeque<(u64, Recorded)>>,
    next: std::sync::atomic::AtomicU64,
    /// How many requests `list` keeps; 0 keeps none.
    limit: usize,
}

impl Recorder {
    /// A recorder keeping the newest `limit` requests (none with 0).
    pub fn new(limit: usize) -> Self {
        Self {
            list: Mutex::new(VecDeque::new()),
            next: std::sync::atomic::AtomicU64::new(0),
            limit,
        }
    }

    /// Records the request `make` describes (made only when it is kept);
    /// returns its sequence number.
    pub fn push(&self, make: impl FnOnce() -> Recorded) -> u64 {
        let seq = self.next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        if self.limit == 0 {
            return seq;
        }
        let r = make();
        let mut list = lock(&self.list);
        if list.len() >= self.limit {
            list.pop_front();
        }
        list.push_back((seq, r));
        seq
    }

    /// Notes the usage reported for request `seq` (if still kept).
    pub fn set_usage(&self, seq: u64, usage: serde_json::Value) {
        if let Some((_, r)) = lock(&self.list).iter_mut().rev().find(|(s, _)| *s == seq) {
            r.usage = Some(usage);
        }
    }

    /// Replaces the body recorded for request `seq` (if still kept).
    pub fn set_body(&self, seq: u64, body: Bytes) {
        if let Some((_, r)) = lock(&self.list).iter_mut().rev().find(|(s, _)| *s == seq) {
            r.body = body;
        }
    }

    pub fn snapshot(&self) -> Vec<Recorded> {
        lock(&self.list).iter().map(|(_, r)| r.clone()).collect()
    }

    pub fn clear(&self) {
        lock(&self.list).clear();
    }
}

/// The record of a request. Its body is copied: hyper hands a body over as a
/// slice of its connection's read buffer, and a record holding the slice
/// keeps the whole buffer alive (the simulator's resident memory was 121
/// MiB after 1.5 million small calls, and 47 MiB after 1.6 million with the
/// copy).
fn received(parts: &axum::http::request::Parts, body: &[u8]) -> Recorded {
    Recorded {
        method: parts.method.as_str().to_owned(),
        path: parts
            .uri
            .path_and_query()
            .map_or_else(|| parts.uri.path().to_owned(), |pq| pq.as_str().to_owned()),
        headers: parts
            .headers
            .iter()
            .map(|(n, v)| {
                (
                    n.as_str().to_owned(),
                    String::from_utf8_lossy(v.as_bytes()).into_owned(),
                )
            })
            .collect(),
        body: Bytes::copy_from_slice(body),
        usage: None,
    }
}

/// Middleware: buffers the body, records the request, and hands an
/// identical request on (with a [`RecordSeq`]). Runs before auth so rejected
/// requests are seen too. [Streamed uploads](STREAMED_UPLOADS) pass through
/// unbuffered.
pub async fn record(State(state): State<Arc<SimState>>, req: Request, next: Next) -> Response {
    let (mut parts, body) = req.into_parts();
    let (seq, resp) = if STREAMED_UPLOADS.contains(&parts.uri.path()) {
        let seq = state.recorder.push(|| received(&parts, &[]));
        parts.extensions.insert(RecordSeq(seq));
        (seq, next.run(Request::from_parts(parts, body)).await)
    } else {
        let (bytes, failed) = match axum::body::to_bytes(body, MAX_BODY).await {
            Ok(b) => (b, false),
            Err(_) => (Bytes::new(), true),
        };
        let seq = state.recorder.push(|| received(&parts, &bytes));
        if failed {
            return ApiError::invalid_request("The request body could not be read.", None)
                .in_dialect(Dialect::for_path(parts.uri.path()))
                .into_response();
        }
        parts.extensions.insert(RecordSeq(seq));
        (
            seq,
            next.run(Request::from_parts(parts, Body::from(bytes)))
                .await,
        )
    };
    if let Some(ReportedUsage(usage)) = resp.extensions().get::<ReportedUsage>() {
        state.recorder.set_usage(seq, usage.clone());
    }
    resp
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(path: &str) -> Recorded {
        Recorded {
            method: "GET".into(),
            path: path.into(),
            headers: vec![("authorization".into(), "Bearer k".into())],
            body: Bytes::from_static(b"{\"a\":1}"),
            usage: None,
        }
    }

    #[test]
    fn accessors() {
        let r = rec("/x");
        assert_eq!(r.header("Authorization"), Some("Bearer k"));
        assert_eq!(r.header("x-missing"), None);
        assert_eq!(r.json(), Some(serde_json::json!({"a": 1})));
    }

    #[test]
    fn keeps_only_the_newest() {
        let rec_list = Recorder::new(MAX_RECORDED);
        for i in 0..MAX_RECORDED + 5 {
            rec_list.push(|| rec(&format!("/{i}")));
        }
        let all = rec_list.snapshot();
        assert_eq!(all.len(), MAX_RECORDED);
        assert_eq!(all[0].path, "/5");
        rec_list.clear();
        assert!(rec_list.snapshot().is_empty());
    }

    #[test]
    fn a_limit_of_none_keeps_nothing_and_still_numbers_requests() {
        let rec_list = Recorder::new(0);
        assert_eq!(rec_list.push(|| rec("/a")), 0);
        assert_eq!(
            rec_list.push(|| unreachable!("a request not kept is not described")),
            1
        );
        assert!(rec_list.snapshot().is_empty());
        let rec_list = Recorder::new(2);
        for i in 0..3 {
            rec_list.push(|| rec(&format!("/{i}")));
        }
        let paths: Vec<String> = rec_list.snapshot().into_iter().map(|r| r.path).collect();
        assert_eq!(paths, ["/1", "/2"]);
    }

    #[test]
    fn a_record_holds_its_body_alone() {
        // hyper hands a body over as a slice of its read buffer.
        let buffer = Bytes::from(vec![b'x'; 64 * 1024]);
        let (parts, ()) = axum::http::Request::builder()
            .uri("/v1/chat/completions")
            .body(())
            .unwrap()
            .into_parts();
        let r = received(&parts, &buffer.slice(0..16));
        drop(buffer);
        let own = r.body.try_into_mut().expect("the record's body is its own");
        assert_eq!(own.len(), 16);
        assert!(own.capacity() < 1024, "capacity {}", own.capacity());
    }
}
