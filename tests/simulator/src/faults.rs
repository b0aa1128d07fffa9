//! Injected failures and stream-shape tweaks.
//!
//! A fault comes either from the queue (`SimServer::push_fault`,
//! `POST /_sim/faults`) or from `[[sim:...]]` directives in the last user
//! message. The queue wins: tests of retries and channel fail-over need the
//! *same* prompt to fail on one attempt and succeed on the next, which a
//! directive in the prompt cannot express.

use std::collections::VecDeque;
use std::sync::Mutex;
use std::time::Duration;

/// A failure applied to one chat request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Fault {
    /// Answer with this status and the vendor's usual error body.
    Status(u16),
    /// Never answer (until the client gives up or the simulator shuts down).
    Hang,
    /// Wait this long, then answer normally.
    Latency(Duration),
    /// 200 with a body that is not valid JSON / not a valid SSE payload.
    Malformed,
    /// Send part of the body, then abort the connection.
    Cut,
    /// The "account is out of money" error that gateways must treat
    /// differently from a rate limit: OpenAI 429 `insufficient_quota`,
    /// Anthropic 400 about the credit balance, Gemini 429
    /// `RESOURCE_EXHAUSTED` about the quota.
    InsufficientQuota,
    /// A stream that ends cleanly after its first event and three more,
    /// without its protocol's finish marker (no `[DONE]`, no
    /// `message_stop`, no `finishReason`). Non-streamed answers are normal.
    Truncate,
}

/// `[[sim:...]]` directives found in the last user message.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Directives {
    pub latency: Option<Duration>,
    /// A terminal fault (status, hang, malformed, cut, truncate).
    pub fault: Option<Fault>,
    pub framing: Framing,
    /// Pause between streamed body chunks (`[[sim:chunk_delay_ms=N]]`).
    pub chunk_delay: Option<Duration>,
    /// `[[sim:parallel]]`: call every declared tool.
    pub parallel: bool,
    /// `[[sim:refuse]]`: a content refusal.
    pub refuse: bool,
    /// `[[sim:finish=RAW]]`: this finish reason, verbatim.
    pub finish: Option<String>,
}

/// How SSE events are laid out on the wire.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Framing {
    pub crlf: bool,
    pub fragment: bool,
    pub comments: bool,
}

const OPEN: &str = "[[sim:";
const CLOSE: &str = "]]";

/// Removes every `[[sim:...]]` directive from `text` and returns the cleaned
/// text with what the directives asked for. One directive may hold several
/// comma-separated items (`[[sim:crlf,fragment]]`). Unknown items are ignored
/// so a typo degrades to a normal answer rather than a confusing failure.
pub fn extract_directives(text: &str) -> (String, Directives) {
    let mut directives = Directives::default();
    let cleaned = scan_directives(text, |item| apply_item(item, &mut directives));
    (cleaned, directives)
}

/// Calls `apply` with each trimmed item of every `[[sim:...]]` directive in
/// `text` and returns the text without them (trimmed; untouched when it has
/// no directive). Shared by the chat and video routes, whose items differ.
pub fn scan_directives(text: &str, mut apply: impl FnMut(&str)) -> String {
    if !text.contains(OPEN) {
        return text.to_owned();
    }
    let mut cleaned = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(start) = rest.find(OPEN) {
        let after_open = &rest[start + OPEN.len()..];
        let Some(len) = after_open.find(CLOSE) else {
            break;
        };
        cleaned.push_str(&rest[..start]);
        for item in after_open[..len].split(',') {
            apply(item.trim());
        }
        rest = &after_open[len + CLOSE.len()..];
    }
    cleaned.push_str(rest);
    cleaned.trim().to_owned()
}

fn apply_item(item: &str, d: &mut Directives) {
    let (key, value) = match item.split_once('=') {
        Some((k, v)) => (k.trim(), Some(v.trim())),
        None => (item, None),
    };
    match (key, value) {
        ("status", Some(v)) => match parse_status(v) {
            Some(fault) => d.fault = Some(fault),
            None => tracing::warn!(item, "ignoring bad status directive"),
        },
        ("hang", None) => d.fault = Some(Fault::Hang),
        ("malformed", None) => d.fault = Some(Fault::Malformed),
        ("cut", None) => d.fault = Some(Fault::Cut),
        ("latency_ms", Some(v)) => match v.parse() {
            Ok(ms) => d.latency = Some(Duration::from_millis(ms)),
            Err(_) => tracing::warn!(item, "ignoring bad latency directive"),
        },
        ("chunk_delay_ms", Some(v)) => match v.parse() {
            Ok(ms) => d.chunk_delay = Some(Duration::from_millis(ms)),
            Err(_) => tracing::warn!(item, "ignoring bad chunk delay directive"),
        },
        ("truncate", None) => d.fault = Some(Fault::Truncate),
        ("parallel", None) => d.parallel = true,
        ("refuse", None) => d.refuse = true,
        ("finish", Some(v)) if !v.is_empty() => d.finish = Some(v.to_owned()),
        ("crlf", None) => d.framing.crlf = true,
        ("fragment", None) => d.framing.fragment = true,
        ("comments", None) => d.framing.comments = true,
        _ => tracing::warn!(item, "ignoring unknown sim directive"),
    }
}

/// `"429"` → `Status(429)`, `"429-quota"` → `InsufficientQuota`.
pub fn parse_status(value: &str) -> Option<Fault> {
    if value == "429-quota" {
        return Some(Fault::InsufficientQuota);
    }
    value.parse().ok().map(Fault::Status)
}

/// FIFO of pending faults. Stores `(fault, remaining)` runs so a huge
/// `count` costs no memory.
#[derive(Default)]
pub struct FaultQueue {
    runs: Mutex<VecDeque<(Fault, usize)>>,
}

impl FaultQueue {
    pub fn push(&self, fault: Fault, count: usize) {
        if count == 0 {
            return;
        }
        lock(&self.runs).push_back((fault, count));
    }

    pub fn pop(&self) -> Option<Fault> {
        let mut runs = lock(&self.runs);
        let (fault, remaining) = runs.front_mut()?;
        let fault = fault.clone();
        *remaining -= 1;
        if *remaining == 0 {
            runs.pop_front();
        }
        Some(fault)
    }

    pub fn clear(&self) {
        lock(&self.runs).clear();
    }

    pub fn pending(&self) -> usize {
        lock(&self.runs)
            .iter()
            .fold(0usize, |acc, (_, n)| acc.saturating_add(*n))
    }
}

/// A panic while holding one of the simulator's locks cannot leave the data
/// half-updated in a way that matters, so poisoning is ignored.
pub(crate) fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_without_directives_is_untouched() {
        let (text, d) = extract_directives("  keep  my spacing ");
        assert_eq!(text, "  keep  my spacing ");
        assert_eq!(d, Directives::default());
    }

    #[test]
    fn directives_are_removed_and_combined() {
        let (text, d) = extract_directives(
            "hello [[sim:latency_ms=50]] world [[sim:crlf, fragment]][[sim:cut]]",
        );
        assert_eq!(text, "hello  world");
        assert_eq!(d.latency, Some(Duration::from_millis(50)));
        assert_eq!(d.fault, Some(Fault::Cut));
        assert!(d.framing.crlf && d.framing.fragment && !d.framing.comments);
    }

    #[test]
    fn status_directives() {
        assert_eq!(
            extract_directives("[[sim:status=503]]").1.fault,
            Some(Fault::Status(503))
        );
        assert_eq!(
            extract_directives("x [[sim:status=429-quota]]").1.fault,
            Some(Fault::InsufficientQuota)
        );
        assert_eq!(extract_directives("[[sim:status=abc]]").1.fault, None);
    }

    #[test]
    fn answer_shaping_directives() {
        let (text, d) = extract_directives(
            "go [[sim:parallel, refuse]] [[sim:finish=pause_turn]] [[sim:truncate]]",
        );
        assert_eq!(text, "go");
        assert!(d.parallel && d.refuse);
        assert_eq!(d.finish.as_deref(), Some("pause_turn"));
        assert_eq!(d.fault, Some(Fault::Truncate));
    }

    #[test]
    fn unterminated_directive_is_left_as_text() {
        let (text, d) = extract_directives("a [[sim:hang");
        assert_eq!(text, "a [[sim:hang");
        assert_eq!(d.fault, None);
    }

    #[test]
    fn queue_is_fifo_with_counts() {
        let q = FaultQueue::default();
        q.push(Fault::Status(429), 2);
        q.push(Fault::Hang, 1);
        q.push(Fault::Cut, 0);
        assert_eq!(q.pending(), 3);
        assert_eq!(q.pop(), Some(Fault::Status(429)));
        assert_eq!(q.pop(), Some(Fault::Status(429)));
        assert_eq!(q.pop(), Some(Fault::Hang));
        assert_eq!(q.pop(), None);
        q.push(Fault::Malformed, usize::MAX);
        assert_eq!(q.pop(), Some(Fault::Malformed));
        q.clear();
        assert_eq!(q.pop(), None);
    }
}
