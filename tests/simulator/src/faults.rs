//! Injected failures and stream-shape tweaks.
//!
//! A fault comes either from the queue (`SimServer::push_fault`,
//! `POST /_sim/faults`) or from `[[sim:...]]` directives in the last user
//! message (for the non-chat endpoints, in their text inputs:
//! [`FaultDirectives`]). The queue wins: tests of retries and channel fail-over need the
//! *same* prompt to fail on one attempt and succeed on the next, which a
//! directive in the prompt cannot express.

use std::collections::VecDeque;
use std::sync::Mutex;
use std::time::Duration;

use axum::response::{IntoResponse, Response};

use crate::errors::{ApiError, Dialect};
use crate::SimState;

/// A failure applied to one chat (or other non-video vendor) request.
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
    /// A 200 stream that reports an error instead of the answer: OpenAI a
    /// role chunk then `data: {"error": ...}`, Anthropic a `message_start`
    /// then an `error` event (`overloaded_error`), Gemini a chunk with
    /// `error`. Non-streamed answers are normal.
    ErrorEvent,
    /// A 200 stream that reports an error after its text: every event up to
    /// its finish marker, then, in place of the marker and the usage, the
    /// protocol's error event ([`Fault::ErrorEvent`]'s), and the end of the
    /// body. Non-streamed answers are normal.
    ErrorMidway,
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
    /// Pause before each streamed event from the second delta up to the
    /// finish marker (`[[sim:delta_delay_ms=N]]`).
    pub delta_delay: Option<Duration>,
    /// `[[sim:parallel]]`: call every declared tool.
    pub parallel: bool,
    /// `[[sim:refuse]]`: a content refusal.
    pub refuse: bool,
    /// `[[sim:finish=RAW]]`: this finish reason, verbatim.
    pub finish: Option<String>,
    /// `[[sim:words=N]]`: the reply's length in words.
    pub words: Option<usize>,
    /// `[[sim:silent]]`: an OpenAI-style answer without any usage.
    pub silent: bool,
}

/// How SSE events are laid out on the wire.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Framing {
    pub crlf: bool,
    pub fragment: bool,
    pub comments: bool,
    /// The whole stream as one body of known length (`[[sim:whole]]`).
    pub whole: bool,
}

/// The longest reply `[[sim:words=N]]` asks for.
pub const MAX_WORDS: usize = 1_000_000;

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

/// `key=value` → (`key`, `Some(value)`), `key` → (`key`, `None`), trimmed.
fn split_item(item: &str) -> (&str, Option<&str>) {
    match item.split_once('=') {
        Some((k, v)) => (k.trim(), Some(v.trim())),
        None => (item.trim(), None),
    }
}

/// Applies one of the fault items every vendor route shares (`status=NNN`,
/// `hang`, `malformed`, `cut`, `truncate`, `latency_ms=N`); false when
/// `key` is not one of them. A bad value is warned about and ignored.
fn apply_fault_item(
    key: &str,
    value: Option<&str>,
    latency: &mut Option<Duration>,
    fault: &mut Option<Fault>,
) -> bool {
    match (key, value) {
        ("status", Some(v)) => match parse_status(v) {
            Some(f) => *fault = Some(f),
            None => tracing::warn!(key, v, "ignoring bad status directive"),
        },
        ("hang", None) => *fault = Some(Fault::Hang),
        ("malformed", None) => *fault = Some(Fault::Malformed),
        ("cut", None) => *fault = Some(Fault::Cut),
        ("truncate", None) => *fault = Some(Fault::Truncate),
        ("latency_ms", Some(v)) => match v.parse() {
            Ok(ms) => *latency = Some(Duration::from_millis(ms)),
            Err(_) => tracing::warn!(key, v, "ignoring bad latency directive"),
        },
        _ => return false,
    }
    true
}

/// The fault directives of a non-chat request (embeddings, images, audio,
/// rerank, moderation), gathered from each of its text inputs.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FaultDirectives {
    pub latency: Option<Duration>,
    /// A terminal fault (status, hang, malformed, cut; `truncate` is
    /// accepted and changes nothing, as for a non-streamed chat answer).
    pub fault: Option<Fault>,
}

impl FaultDirectives {
    /// Removes the directives from `text` (returned cleaned, see
    /// [`scan_directives`]) and keeps the fault items; every other item is
    /// offered to `extra` as (key, value), which returns false for items it
    /// does not know either (those are warned about and ignored). Later
    /// items win, across calls too.
    pub fn scan(
        &mut self,
        text: &str,
        mut extra: impl FnMut(&str, Option<&str>) -> bool,
    ) -> String {
        scan_directives(text, |item| {
            let (key, value) = split_item(item);
            if !apply_fault_item(key, value, &mut self.latency, &mut self.fault)
                && !extra(key, value)
            {
                tracing::warn!(item, "ignoring unknown sim directive");
            }
        })
    }
}

fn apply_item(item: &str, d: &mut Directives) {
    let (key, value) = split_item(item);
    if apply_fault_item(key, value, &mut d.latency, &mut d.fault) {
        return;
    }
    match (key, value) {
        ("chunk_delay_ms", Some(v)) => match v.parse() {
            Ok(ms) => d.chunk_delay = Some(Duration::from_millis(ms)),
            Err(_) => tracing::warn!(item, "ignoring bad chunk delay directive"),
        },
        ("delta_delay_ms", Some(v)) => match v.parse() {
            Ok(ms) => d.delta_delay = Some(Duration::from_millis(ms)),
            Err(_) => tracing::warn!(item, "ignoring bad delta delay directive"),
        },
        ("words", Some(v)) => match v.parse::<usize>() {
            Ok(n) if (1..=MAX_WORDS).contains(&n) => d.words = Some(n),
            _ => tracing::warn!(item, "ignoring bad words directive"),
        },
        ("parallel", None) => d.parallel = true,
        ("refuse", None) => d.refuse = true,
        ("silent", None) => d.silent = true,
        ("finish", Some(v)) if !v.is_empty() => d.finish = Some(v.to_owned()),
        ("crlf", None) => d.framing.crlf = true,
        ("fragment", None) => d.framing.fragment = true,
        ("comments", None) => d.framing.comments = true,
        ("whole", None) => d.framing.whole = true,
        // Chat streams only: not one of the fault items the other
        // endpoints share.
        ("error_midway", None) => d.fault = Some(Fault::ErrorMidway),
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

/// Applies one call's faults: the queued one if there is one (it replaces
/// whatever the request asked for), else the request's own `latency` and
/// `fault`. Waits out a latency; answers a status, an exhausted quota or a
/// hang itself (`Err`: the response that replaces the answer). Otherwise
/// returns the fault left for the caller to shape its answer with
/// (malformed, cut, truncate).
pub(crate) async fn apply(
    state: &SimState,
    dialect: Dialect,
    latency: Option<Duration>,
    fault: Option<Fault>,
) -> Result<Option<Fault>, Response> {
    let (latency, fault) = match state.faults.pop() {
        Some(Fault::Latency(d)) => (Some(d), None),
        Some(queued) => (None, Some(queued)),
        None => (latency, fault),
    };
    let gone = || {
        ApiError::shutting_down()
            .in_dialect(dialect)
            .into_response()
    };
    if let Some(delay) = latency {
        if !state.wait(delay).await {
            return Err(gone());
        }
    }
    match fault {
        Some(Fault::Status(status)) => Err(ApiError::for_status(status)
            .in_dialect(dialect)
            .into_response()),
        Some(Fault::InsufficientQuota) => Err(ApiError::out_of_quota(dialect).into_response()),
        Some(Fault::Hang) => {
            state.shutdown.cancelled().await;
            Err(gone())
        }
        other => Ok(other),
    }
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
        let (_, d) = extract_directives("go [[sim:error_midway,whole]]");
        assert_eq!(d.fault, Some(Fault::ErrorMidway));
        assert!(d.framing.whole);
    }

    #[test]
    fn fault_directives_keep_fault_items_and_offer_the_rest() {
        let mut d = FaultDirectives::default();
        let mut flags = Vec::new();
        let text = d.scan(
            "a [[sim:latency_ms=5, flag=hate]] b [[sim:status=503,parallel]]",
            |key, value| {
                flags.push((key.to_owned(), value.map(str::to_owned)));
                key == "flag"
            },
        );
        assert_eq!(text, "a  b");
        assert_eq!(d.latency, Some(Duration::from_millis(5)));
        assert_eq!(d.fault, Some(Fault::Status(503)));
        assert_eq!(
            flags,
            [
                ("flag".to_owned(), Some("hate".to_owned())),
                ("parallel".to_owned(), None)
            ]
        );
        // A second text adds to the same directives; later items win.
        assert_eq!(d.scan("[[sim:cut]] c", |_, _| false), "c");
        assert_eq!(d.fault, Some(Fault::Cut));
        assert_eq!(d.latency, Some(Duration::from_millis(5)));
    }

    #[test]
    fn paced_long_stream_directives() {
        // What `make bench`'s streamed test asks for.
        let (text, d) = extract_directives("hello [[sim:words=64,delta_delay_ms=20]]");
        assert_eq!(text, "hello");
        assert_eq!(d.words, Some(64));
        assert_eq!(d.delta_delay, Some(Duration::from_millis(20)));
        assert_eq!((d.chunk_delay, d.fault), (None, None));
        let (_, d) = extract_directives("[[sim:chunk_delay_ms=5,delta_delay_ms=soon, words=0]]");
        assert_eq!(
            (d.chunk_delay, d.delta_delay, d.words),
            (Some(Duration::from_millis(5)), None, None)
        );
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
