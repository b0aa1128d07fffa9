//! The OpenAI Responses codec (`POST /v1/responses`), both ways.
//!
//! The gateway is stateless: a request must carry its whole conversation
//! (`previous_response_id` and stored items are refused with a clear error).
//!
//! Output items map to blocks in order: `reasoning` items are thinking (their
//! summary the text, their `encrypted_content` the signature), `message`
//! items text, `function_call` items tool calls. Redacted thinking travels as
//! a reasoning item whose `encrypted_content` starts with
//! [`REDACTED_PREFIX`], which this codec reads back.
//!
//! Streams follow what the openai SDK's `responses.stream()` checks:
//! `response.created` first, every item `added` before its deltas and `done`
//! after, content parts added before their text, ids stable from `added` to
//! `response.completed`, which repeats every item.

pub mod passthrough;
mod request;
mod response;
mod stream;

pub use request::{encode_request, parse_request};
pub use response::{encode_response, parse_response, parse_usage};
pub use stream::{StreamEncoder, StreamParser};

/// Marks redacted thinking carried in a reasoning item's `encrypted_content`.
pub const REDACTED_PREFIX: &str = "gateway-redacted:";
