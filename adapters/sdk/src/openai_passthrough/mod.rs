//! The hot path for OpenAI-compatible vendors when the client also speaks
//! OpenAI chat: bodies are parsed once into a `Value`, edited in place and
//! written back, never round-tripped through the canonical types, so members
//! this gateway does not know about reach the vendor and the client intact.
//!
//! What is edited, and why:
//! - requests carry the channel's upstream model name and, when streamed,
//!   always ask the vendor for a usage report so the host can bill;
//! - answers carry the client's model name and always show the cached and
//!   reasoning token details;
//! - streams hide the usage report from clients that did not ask for it by
//!   folding it into the last content chunk (see [`StreamRelay`]).

mod members;
mod request;
mod response;
mod stream;

use serde_json::value::RawValue;
use serde_json::Value;

use crate::canonical::Usage;
use crate::openai_chat::{ensure_usage_details, parse_usage};

pub use request::{prepare_request, PreparedRequest};
pub use response::{finish_response, FinishedResponse};
pub use stream::{StreamClose, StreamRelay};

/// `upstream-request.state` when the client itself asked for
/// `stream_options.include_usage`; the empty string otherwise.
pub const STATE_CLIENT_WANTS_USAGE: &str = "usage";

/// Reads back the state [`prepare_request`] produced.
pub fn client_wants_usage(state: &str) -> bool {
    state == STATE_CLIENT_WANTS_USAGE
}

/// A value as raw JSON text, to splice into a body (writing a `Value`
/// does not fail in practice: its keys are strings).
fn raw(value: &Value) -> Option<Box<RawValue>> {
    serde_json::value::to_raw_value(value).ok()
}

/// A spliced member's value as a tree (it was checked as JSON already).
fn member_value(member: &RawValue) -> Value {
    serde_json::from_str(member.get()).unwrap_or(Value::Null)
}

/// A vendor's `usage` member, read for the bill and for the client.
struct VendorUsage {
    billed: Option<Usage>,
    /// The usage with the details clients expect filled in
    /// ([`ensure_usage_details`]), to splice in instead of the vendor's;
    /// `None` when the vendor's had them all and goes on as written.
    filled: Option<Box<RawValue>>,
}

/// Reads a `usage` member; `None` when it is not an object (no report).
fn read_usage(member: &RawValue) -> Option<VendorUsage> {
    let Value::Object(object) = member_value(member) else {
        return None;
    };
    let mut usage = Value::Object(object);
    let added = ensure_usage_details(&mut usage);
    Some(VendorUsage {
        billed: parse_usage(&usage),
        filled: if added { raw(&usage) } else { None },
    })
}
