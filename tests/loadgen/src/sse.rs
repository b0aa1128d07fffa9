//! Reading an OpenAI chat stream as it arrives: counts its events (frames),
//! notices the first content delta (time to first token) and the `[DONE]`
//! end marker. The events are framed by `eventsource-stream`, as in the
//! gateway (chunks may split lines and events anywhere); this module adds
//! what loadgen measures, and a bound on bytes that complete no event.

use bytes::Bytes;
use eventsource_stream::Eventsource;
use futures_util::{Stream, StreamExt};
use serde_json::Value;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

/// How many bytes may arrive without completing an event (more is a broken
/// stream).
const MAX_PENDING: usize = 1 << 20;

/// The `data` of each event of a byte stream, in order; an error ends it.
pub fn events<S, E>(body: S) -> impl Stream<Item = Result<String, String>>
where
    S: Stream<Item = Result<Bytes, E>>,
    E: std::fmt::Display,
{
    let pending = Arc::new(AtomicUsize::new(0));
    let counted = {
        let pending = pending.clone();
        body.map(move |chunk| {
            let chunk = chunk.map_err(|e| e.to_string())?;
            if pending.fetch_add(chunk.len(), Ordering::Relaxed) + chunk.len() > MAX_PENDING {
                return Err("more than 1 MiB without completing an SSE event".to_string());
            }
            Ok(chunk)
        })
    };
    counted.eventsource().map(move |event| {
        pending.store(0, Ordering::Relaxed);
        event.map(|e| e.data).map_err(|e| e.to_string())
    })
}

#[derive(Debug, Default)]
pub struct Scanner {
    /// A content delta has been seen.
    pub content_seen: bool,
    /// `data: [DONE]` has been seen.
    pub done: bool,
}

impl Scanner {
    /// Takes one event's data; says whether it is the stream's first
    /// content delta.
    pub fn event(&mut self, data: &str) -> bool {
        if data == "[DONE]" {
            self.done = true;
        } else if !self.content_seen && has_content(data) {
            self.content_seen = true;
            return true;
        }
        false
    }
}

/// A chat chunk whose first choice's delta carries non-empty `content`.
fn has_content(data: &str) -> bool {
    // Cheap test first: most chunks after the first token are never parsed.
    if !data.contains("\"content\"") {
        return false;
    }
    serde_json::from_str::<Value>(data).is_ok_and(|v| {
        v["choices"][0]["delta"]["content"]
            .as_str()
            .is_some_and(|s| !s.is_empty())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const ROLE: &str =
        r#"data: {"choices":[{"index":0,"delta":{"role":"assistant","content":""}}]}"#;
    const WORD: &str = r#"data: {"choices":[{"index":0,"delta":{"content":"Simulated "}}]}"#;
    const FINISH: &str = r#"data: {"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}"#;

    fn stream(nl: &str) -> String {
        [ROLE, WORD, WORD, FINISH, "data: [DONE]"]
            .iter()
            .map(|e| format!("{e}{nl}{nl}"))
            .collect()
    }

    /// What reading `bytes` in chunks of `size` gives: frames, first
    /// contents, the number of chunks read when the first content event
    /// came out, and the scanner.
    async fn scan(bytes: &[u8], size: usize) -> Result<(u64, u32, Option<usize>, Scanner), String> {
        let read = Arc::new(AtomicUsize::new(0));
        let chunks: Vec<Result<Bytes, String>> = bytes
            .chunks(size)
            .map(|c| Ok(Bytes::copy_from_slice(c)))
            .collect();
        let counter = read.clone();
        let body = futures_util::stream::iter(chunks).inspect(move |_| {
            counter.fetch_add(1, Ordering::Relaxed);
        });
        let mut s = Scanner::default();
        let (mut frames, mut firsts, mut first_after) = (0, 0, None);
        let mut events = std::pin::pin!(events(body));
        while let Some(data) = events.next().await {
            frames += 1;
            if s.event(&data?) {
                firsts += 1;
                first_after = Some(read.load(Ordering::Relaxed));
            }
        }
        Ok((frames, firsts, first_after, s))
    }

    #[tokio::test]
    async fn whole_stream_in_one_chunk() {
        let bytes = stream("\n").into_bytes();
        let (frames, firsts, _, s) = scan(&bytes, bytes.len()).await.expect("scan");
        assert_eq!((frames, firsts), (5, 1));
        assert!(s.done && s.content_seen);
    }

    #[tokio::test]
    async fn any_split_gives_the_same_counts() {
        for nl in ["\n", "\r\n"] {
            let bytes = stream(nl).into_bytes();
            for size in [1, 2, 3, 7, 50] {
                let (frames, firsts, first_after, s) = scan(&bytes, size).await.expect("scan");
                assert_eq!((frames, firsts), (5, 1), "nl {nl:?} size {size}");
                assert!(s.done);
                // The first content delta ends in the second event: it comes
                // out once the chunk holding that event's end has been read.
                let second_end = ROLE.len() + WORD.len() + 4 * nl.len();
                let at = (first_after.expect("first content") - 1) * size;
                assert!(at < second_end && second_end <= at + size, "size {size}");
            }
        }
    }

    #[tokio::test]
    async fn comments_names_and_empty_content_are_not_tokens() {
        let first = format!(
            ": keep-alive\n\nevent: x\n{ROLE}\n\n{}\n\n",
            r#"data: {"choices":[],"usage":{"content":1}}"#
        );
        let (frames, firsts, _, s) = scan(first.as_bytes(), first.len()).await.expect("scan");
        assert_eq!((frames, firsts), (2, 0));
        assert!(!s.done);
        // Without the end marker the stream is not done.
        let more = format!("{first}{WORD}\n\n");
        let (_, firsts, _, s) = scan(more.as_bytes(), more.len()).await.expect("scan");
        assert!(firsts == 1 && !s.done);
    }

    #[tokio::test]
    async fn runaway_lines_are_refused() {
        let bytes = vec![b'x'; MAX_PENDING + 1];
        assert!(scan(&bytes, 4096).await.is_err());
    }
}
