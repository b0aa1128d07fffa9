//! Reading an OpenAI chat stream as it arrives: counts its events (frames),
//! notices the first content delta (time to first token) and the `[DONE]`
//! end marker. Body chunks may split lines and events anywhere.

use serde_json::Value;

/// How much of a line may be buffered (a longer one is a broken stream).
const MAX_LINE: usize = 1 << 20;

#[derive(Debug, Default)]
pub struct Scanner {
    /// The unfinished line.
    line: Vec<u8>,
    /// The `data:` payload of the event being read.
    data: Vec<u8>,
    /// Whether the event being read had a `data:` line.
    has_data: bool,
    /// A content delta has been seen.
    pub content_seen: bool,
    /// `data: [DONE]` has been seen.
    pub done: bool,
}

/// What one chunk completed.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Fed {
    /// Events (with a `data:` line) that ended in this chunk.
    pub frames: u64,
    /// The first content delta of the stream ended in this chunk.
    pub first_content: bool,
}

impl Scanner {
    pub fn feed(&mut self, chunk: &[u8]) -> Result<Fed, &'static str> {
        let mut fed = Fed::default();
        let mut rest = chunk;
        while let Some(nl) = rest.iter().position(|&b| b == b'\n') {
            self.line.extend_from_slice(&rest[..nl]);
            rest = &rest[nl + 1..];
            let mut line = std::mem::take(&mut self.line);
            if line.last() == Some(&b'\r') {
                line.pop();
            }
            self.line_done(&line, &mut fed);
            // Keep the allocation for the next line.
            line.clear();
            self.line = line;
        }
        self.line.extend_from_slice(rest);
        if self.line.len() > MAX_LINE {
            return Err("an SSE line longer than 1 MiB");
        }
        Ok(fed)
    }

    fn line_done(&mut self, line: &[u8], fed: &mut Fed) {
        if line.is_empty() {
            if std::mem::take(&mut self.has_data) {
                self.event_done(fed);
            }
            self.data.clear();
        } else if let Some(payload) = line.strip_prefix(b"data:") {
            let payload = payload.strip_prefix(b" ").unwrap_or(payload);
            if self.has_data {
                self.data.push(b'\n');
            }
            self.data.extend_from_slice(payload);
            self.has_data = true;
        }
        // Comments (`: ...`), `event:`, `id:` and `retry:` lines are not
        // frames of their own.
    }

    fn event_done(&mut self, fed: &mut Fed) {
        fed.frames += 1;
        if self.data == b"[DONE]" {
            self.done = true;
        } else if !self.content_seen && has_content(&self.data) {
            self.content_seen = true;
            fed.first_content = true;
        }
    }
}

/// A chat chunk whose first choice's delta carries non-empty `content`.
fn has_content(data: &[u8]) -> bool {
    // Cheap test first: most chunks after the first token are never parsed.
    if !data.windows(9).any(|w| w == b"\"content\"") {
        return false;
    }
    serde_json::from_slice::<Value>(data).is_ok_and(|v| {
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

    #[test]
    fn whole_stream_in_one_chunk() {
        let mut s = Scanner::default();
        let fed = s.feed(stream("\n").as_bytes()).expect("feed");
        assert_eq!(
            fed,
            Fed {
                frames: 5,
                first_content: true
            }
        );
        assert!(s.done && s.content_seen);
    }

    #[test]
    fn any_split_gives_the_same_counts() {
        for nl in ["\n", "\r\n"] {
            let bytes = stream(nl).into_bytes();
            for size in [1, 2, 3, 7, 50] {
                let mut s = Scanner::default();
                let (mut frames, mut firsts, mut first_at) = (0, 0, None);
                for (i, chunk) in bytes.chunks(size).enumerate() {
                    let fed = s.feed(chunk).expect("feed");
                    frames += fed.frames;
                    if fed.first_content {
                        firsts += 1;
                        first_at = Some(i * size);
                    }
                }
                assert_eq!((frames, firsts), (5, 1), "nl {nl:?} size {size}");
                assert!(s.done);
                // The first content delta ends in the second event.
                let second_end = ROLE.len() + WORD.len() + 4 * nl.len();
                let at = first_at.expect("first content");
                assert!(at < second_end && second_end <= at + size, "size {size}");
            }
        }
    }

    #[test]
    fn comments_names_and_empty_content_are_not_tokens() {
        let mut s = Scanner::default();
        let fed = s
            .feed(
                format!(
                    ": keep-alive\n\nevent: x\n{ROLE}\n\n{}\n\n",
                    r#"data: {"choices":[],"usage":{"content":1}}"#
                )
                .as_bytes(),
            )
            .expect("feed");
        assert_eq!(
            fed,
            Fed {
                frames: 2,
                first_content: false
            }
        );
        assert!(!s.done);
        // Without the end marker the stream is not done.
        let fed = s.feed(format!("{WORD}\n\n").as_bytes()).expect("feed");
        assert!(fed.first_content && !s.done);
    }

    #[test]
    fn runaway_lines_are_refused() {
        let mut s = Scanner::default();
        assert!(s.feed(&vec![b'x'; MAX_LINE + 1]).is_err());
    }
}
