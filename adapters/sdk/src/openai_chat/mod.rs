//! The OpenAI chat-completions codec: canonical types ⇄ OpenAI JSON.
//!
//! Readers are lenient where vendors differ harmlessly (a missing `index`,
//! counters sent as floats, unknown finish reasons) and strict where a wrong
//! guess would change meaning (a message without a known role).

mod chunk;
mod names;
mod request;
mod response;
mod usage;

pub use chunk::{encode_chunk, encode_usage_chunk, parse_chunk};
pub use names::{finish_reason_from, finish_reason_name, role_from, role_name};
pub use request::{encode_request, parse_request};
pub use response::{encode_response, parse_response};
pub use usage::{encode_usage, ensure_usage_details, parse_usage};
