//! The OpenAI chat-completions codec: canonical form ⇄ OpenAI JSON, both
//! ways, so it reads OpenAI clients and writes to OpenAI-compatible vendors.
//!
//! Readers are lenient where vendors differ harmlessly (a missing `index`,
//! counters sent as floats, `reasoning` for `reasoning_content`) and strict
//! where a wrong guess would change meaning (a message without a known role).

mod names;
mod read;
mod request;
mod response;
mod stream;
mod usage;

pub use names::{finish_reason_from, finish_reason_name, role_from};
pub use read::{read_request, read_response};
pub use request::{encode_request, parse_request, write_request};
pub use response::{encode_response, parse_response, write_response};
pub use stream::{StreamEncoder, StreamParser};
pub use usage::{encode_usage, ensure_usage_details, parse_usage};
