//! The Anthropic Messages codec: canonical form ⇄ Anthropic JSON, both ways
//! (request, response, stream), and the same-protocol passthrough.
//!
//! Usage: Anthropic's `input_tokens` excludes cache reads and writes, which
//! come in addition (`cache_read_input_tokens`, `cache_creation_input_tokens`);
//! the canonical `input_tokens` includes both, so readers add them and
//! writers subtract them.
//!
//! Thinking blocks carry the vendor's signature; it is kept as is both ways.
//! A thinking block without a signature (reasoning from an OpenAI-style
//! vendor) is not sent to an Anthropic vendor, which would refuse it.

mod passthrough;
mod read;
mod request;
mod response;
mod stream;

pub use passthrough::{finish_response, prepare_request, StreamRelay};
pub use read::{read_request, read_response};
pub use request::{encode_request, parse_request, write_request};
pub use response::{encode_response, parse_response, parse_usage, write_response};
pub use stream::{StreamEncoder, StreamParser};

use crate::canonical::FinishReason;

/// Output cap for vendors that require one when the client gave none.
pub const DEFAULT_MAX_TOKENS: u64 = 4096;

/// The smallest thinking budget Anthropic accepts.
pub const MIN_THINKING_BUDGET: u64 = 1024;

pub fn finish_reason_from(reason: &str, stop_sequence: Option<&str>) -> FinishReason {
    match reason {
        "end_turn" => FinishReason::Stop,
        "max_tokens" => FinishReason::Length,
        "tool_use" => FinishReason::ToolCalls,
        "stop_sequence" => FinishReason::StopSequence(stop_sequence.map(str::to_owned)),
        "refusal" => FinishReason::Refusal,
        other => FinishReason::Other(other.to_owned()),
    }
}

/// `(stop_reason, stop_sequence)` in Anthropic's words.
pub fn finish_reason_name(reason: &FinishReason) -> (String, Option<String>) {
    let name = match reason {
        FinishReason::Stop => "end_turn",
        FinishReason::Length => "max_tokens",
        FinishReason::ToolCalls => "tool_use",
        FinishReason::StopSequence(s) => return ("stop_sequence".to_owned(), s.clone()),
        FinishReason::ContentFilter | FinishReason::Refusal => "refusal",
        FinishReason::Other(raw) => raw,
    };
    (name.to_owned(), None)
}
