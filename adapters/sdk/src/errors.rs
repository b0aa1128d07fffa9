//! Maps a vendor's error answer to the host's terms: the status the client
//! sees, a stable error code, a safe message, and whether another channel may
//! be tried.
//!
//! The mapping is about whose fault the failure is. A client mistake (400/422)
//! is passed on as the client's; anything that is the channel's problem (its
//! key, its quota, its vendor being down) is a 5xx from the gateway's point of
//! view and retryable, because another channel may well succeed.

use serde_json::Value;

use crate::json::str_member;
use crate::redact::clean_message;

/// The codes this module produces (spec §7.2 plus the generic upstream ones).
pub mod code {
    pub const INVALID_REQUEST: &str = "invalid_request";
    pub const UPSTREAM_RATE_LIMITED: &str = "upstream_rate_limited";
    pub const UPSTREAM_QUOTA_EXCEEDED: &str = "upstream_quota_exceeded";
    pub const UPSTREAM_AUTH_FAILED: &str = "upstream_auth_failed";
    pub const UPSTREAM_TIMEOUT: &str = "upstream_timeout";
    pub const UPSTREAM_ERROR: &str = "upstream_error";
}

/// Longest vendor message (in characters) quoted to the client.
pub const MAX_VENDOR_MESSAGE_CHARS: usize = 300;

/// A vendor failure in the host's terms (WIT `upstream-error`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UpstreamFailure {
    pub status: u16,
    pub code: &'static str,
    pub message: String,
    pub retryable: bool,
}

/// What a vendor said about its failure.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct VendorError {
    /// Already cleaned: single line, no credentials, truncated.
    pub message: String,
    pub kind: Option<String>,
    pub code: Option<String>,
}

/// Maps an OpenAI-style error answer (`{"error":{"message","type","code"}}`,
/// or anything else, JSON or not) to the host's terms.
pub fn map_openai_error(status: u16, body: &[u8]) -> UpstreamFailure {
    let vendor = read_vendor_error(body);
    let (client_status, code, retryable) = classify(status, &vendor);
    UpstreamFailure {
        status: client_status,
        code,
        message: upstream_message(status, &vendor.message),
        retryable,
    }
}

/// Maps a vendor's error answer, whatever its protocol, to the host's terms.
/// The readers understand OpenAI's `{"error":{...}}`, Anthropic's
/// `{"type":"error","error":{"type","message"}}` and Gemini's
/// `{"error":{"code","message","status"}}` alike; the status decides.
pub fn map_vendor_error(
    _protocol: crate::bindings::types::Protocol,
    status: u16,
    _headers: &[crate::bindings::types::Header],
    body: &[u8],
) -> UpstreamFailure {
    map_openai_error(status, body)
}

/// A failure the vendor reported inside a 2xx answer (an error event in its
/// stream): rate limits stay rate limits, anything else is the upstream's
/// error. `kind` is the vendor's error type or status word, when it gave one.
pub fn in_answer_failure(kind: Option<&str>, message: &str) -> UpstreamFailure {
    let limited = kind.is_some_and(|k| {
        let k = k.to_ascii_lowercase();
        k.contains("rate_limit") || k.contains("resource_exhausted")
    });
    let (status, code) = if limited {
        (429, code::UPSTREAM_RATE_LIMITED)
    } else {
        (502, code::UPSTREAM_ERROR)
    };
    let message = clean_message(message, MAX_VENDOR_MESSAGE_CHARS);
    UpstreamFailure {
        status,
        code,
        message: if message.is_empty() {
            "the upstream reported an error mid-answer".to_owned()
        } else {
            format!("the upstream reported an error mid-answer: {message}")
        },
        retryable: false,
    }
}

/// Reads an in-answer error object (`{"error": {...}}` or a bare error
/// object) into a failure.
pub fn in_answer_failure_from(value: &Value) -> UpstreamFailure {
    let vendor = from_json(value);
    let kind = vendor.kind.clone().or(vendor.code.clone());
    in_answer_failure(kind.as_deref(), &vendor.message)
}

/// The vendor's `Retry-After`, when it is a number of seconds.
pub fn retry_after_secs(headers: &[crate::bindings::types::Header]) -> Option<u32> {
    headers
        .iter()
        .find(|h| h.name.eq_ignore_ascii_case("retry-after"))
        .and_then(|h| h.value.trim().parse::<u32>().ok())
}

/// "upstream answered <status>: <message>", the form every mapped error takes.
pub fn upstream_message(status: u16, vendor_message: &str) -> String {
    if vendor_message.is_empty() {
        format!("upstream answered {status}")
    } else {
        format!("upstream answered {status}: {vendor_message}")
    }
}

fn classify(status: u16, vendor: &VendorError) -> (u16, &'static str, bool) {
    match status {
        429 if vendor.says("insufficient_quota") => (503, code::UPSTREAM_QUOTA_EXCEEDED, true),
        // Anthropic's "credit balance is too low" and `billing_error`: the
        // channel's own account ran dry.
        400 | 403 if vendor.says("billing_error") || vendor.message.contains("credit balance") => {
            (503, code::UPSTREAM_QUOTA_EXCEEDED, true)
        }
        429 => (429, code::UPSTREAM_RATE_LIMITED, true),
        // "Payment required" is the channel's own account running dry, the
        // same situation as `insufficient_quota`.
        402 => (503, code::UPSTREAM_QUOTA_EXCEEDED, true),
        // Gemini answers a bad key with 400 INVALID_ARGUMENT: still the channel's problem.
        400 if vendor.message.contains("API key") || vendor.message.contains("API_KEY") => {
            (502, code::UPSTREAM_AUTH_FAILED, true)
        }
        400 | 422 => (400, code::INVALID_REQUEST, false),
        // Another channel may hold a working key.
        401 | 403 => (502, code::UPSTREAM_AUTH_FAILED, true),
        // Usually a model or deployment missing on this channel only.
        404 => (502, code::UPSTREAM_ERROR, true),
        // Anthropic's "overloaded".
        529 => (503, code::UPSTREAM_ERROR, true),
        408 | 504 => (504, code::UPSTREAM_TIMEOUT, true),
        500..=599 => (502, code::UPSTREAM_ERROR, true),
        // Anything else (other 4xx, or a non-error status here by mistake)
        // says nothing about other channels, so retrying would only add load.
        _ => (502, code::UPSTREAM_ERROR, false),
    }
}

impl VendorError {
    fn says(&self, what: &str) -> bool {
        self.code.as_deref() == Some(what) || self.kind.as_deref() == Some(what)
    }
}

/// Reads the vendor's message, type and code from an error body. Understands
/// `{"error":{...}}`, `{"error":"..."}`, top-level `message`/`detail`, a list
/// wrapping any of these, and plain text.
pub fn read_vendor_error(body: &[u8]) -> VendorError {
    match serde_json::from_slice::<Value>(body) {
        Ok(value) => from_json(&value),
        Err(_) => VendorError {
            message: clean_message(&String::from_utf8_lossy(body), MAX_VENDOR_MESSAGE_CHARS),
            kind: None,
            code: None,
        },
    }
}

fn from_json(value: &Value) -> VendorError {
    let value = match value {
        Value::Array(items) => items.first().unwrap_or(&Value::Null),
        other => other,
    };
    let detail = match value.get("error") {
        Some(error @ Value::Object(_)) => error,
        Some(Value::String(message)) => {
            return VendorError {
                message: clean_message(message, MAX_VENDOR_MESSAGE_CHARS),
                kind: None,
                code: str_member(value, "code").map(str::to_owned),
            };
        }
        _ => value,
    };
    let message = str_member(detail, "message")
        .or_else(|| str_member(detail, "detail"))
        .map(|m| clean_message(m, MAX_VENDOR_MESSAGE_CHARS))
        .unwrap_or_else(|| match value {
            // No recognisable message: show the JSON itself rather than nothing.
            Value::Object(map) if !map.is_empty() => {
                clean_message(&value.to_string(), MAX_VENDOR_MESSAGE_CHARS)
            }
            _ => String::new(),
        });
    VendorError {
        message,
        // OpenAI and Anthropic say `type`; Gemini (google.rpc) says `status`.
        kind: str_member(detail, "type")
            .or_else(|| str_member(detail, "status"))
            .map(str::to_owned),
        code: detail.get("code").and_then(code_text),
    }
}

/// Vendors send `code` as a string, a number or `null`.
fn code_text(value: &Value) -> Option<String> {
    match value {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn openai_body(message: &str, kind: &str, code: &str) -> Vec<u8> {
        serde_json::json!({"error": {"message": message, "type": kind, "code": code}})
            .to_string()
            .into_bytes()
    }

    fn mapped(status: u16, body: &[u8]) -> (u16, &'static str, bool) {
        let failure = map_openai_error(status, body);
        (failure.status, failure.code, failure.retryable)
    }

    #[test]
    fn quota_429_is_503_quota_exceeded() {
        let by_code = openai_body(
            "You exceeded your quota",
            "insufficient_quota",
            "insufficient_quota",
        );
        assert_eq!(
            mapped(429, &by_code),
            (503, code::UPSTREAM_QUOTA_EXCEEDED, true)
        );
        let by_type =
            br#"{"error":{"message":"no money","type":"insufficient_quota","code":null}}"#;
        assert_eq!(
            mapped(429, by_type),
            (503, code::UPSTREAM_QUOTA_EXCEEDED, true)
        );
    }

    #[test]
    fn other_429_is_rate_limited() {
        let body = openai_body("Rate limit reached", "requests", "rate_limit_exceeded");
        assert_eq!(mapped(429, &body), (429, code::UPSTREAM_RATE_LIMITED, true));
        assert_eq!(mapped(429, b""), (429, code::UPSTREAM_RATE_LIMITED, true));
    }

    #[test]
    fn client_mistakes_keep_the_vendor_message() {
        let body = openai_body(
            "'messages' is a required property",
            "invalid_request_error",
            "",
        );
        let failure = map_openai_error(400, &body);
        assert_eq!(failure.status, 400);
        assert_eq!(failure.code, code::INVALID_REQUEST);
        assert!(!failure.retryable);
        assert_eq!(
            failure.message,
            "upstream answered 400: 'messages' is a required property"
        );
        assert_eq!(mapped(422, b"{}"), (400, code::INVALID_REQUEST, false));
    }

    #[test]
    fn status_table() {
        assert_eq!(mapped(401, b""), (502, code::UPSTREAM_AUTH_FAILED, true));
        assert_eq!(mapped(403, b""), (502, code::UPSTREAM_AUTH_FAILED, true));
        assert_eq!(mapped(404, b""), (502, code::UPSTREAM_ERROR, true));
        assert_eq!(mapped(408, b""), (504, code::UPSTREAM_TIMEOUT, true));
        assert_eq!(mapped(504, b""), (504, code::UPSTREAM_TIMEOUT, true));
        assert_eq!(mapped(500, b""), (502, code::UPSTREAM_ERROR, true));
        assert_eq!(mapped(503, b""), (502, code::UPSTREAM_ERROR, true));
        assert_eq!(mapped(402, b""), (503, code::UPSTREAM_QUOTA_EXCEEDED, true));
        assert_eq!(mapped(409, b""), (502, code::UPSTREAM_ERROR, false));
        assert_eq!(mapped(302, b""), (502, code::UPSTREAM_ERROR, false));
    }

    #[test]
    fn credentials_never_reach_the_message() {
        let body = openai_body(
            "Incorrect API key provided: sk-proj-abcd************************wxyz.",
            "invalid_request_error",
            "invalid_api_key",
        );
        let failure = map_openai_error(401, &body);
        assert_eq!(
            failure.message,
            "upstream answered 401: Incorrect API key provided: [redacted]."
        );
        let failure = map_openai_error(403, b"denied for Authorization: Bearer abc.def.ghi");
        assert!(!failure.message.contains("abc.def"), "{}", failure.message);
    }

    #[test]
    fn non_json_bodies_are_quoted_cleaned() {
        let failure = map_openai_error(502, b"<html>\r\n<h1>502 Bad Gateway</h1>\n</html>");
        assert_eq!(
            failure.message,
            "upstream answered 502: <html> <h1>502 Bad Gateway</h1> </html>"
        );
        assert_eq!(map_openai_error(500, b"").message, "upstream answered 500");
        let long = vec![b'a'; 5000];
        let failure = map_openai_error(500, &long);
        assert!(failure.message.chars().count() < 340);
    }

    #[test]
    fn other_error_shapes_are_understood() {
        assert_eq!(
            read_vendor_error(br#"{"error":"model overloaded","code":"busy"}"#),
            VendorError {
                message: "model overloaded".into(),
                kind: None,
                code: Some("busy".into()),
            }
        );
        let vllm = br#"{"object":"error","message":"bad","type":"BadRequestError","code":400}"#;
        assert_eq!(
            read_vendor_error(vllm),
            VendorError {
                message: "bad".into(),
                kind: Some("BadRequestError".into()),
                code: Some("400".into()),
            }
        );
        let listed =
            br#"[{"error":{"code":429,"message":"slow down","status":"RESOURCE_EXHAUSTED"}}]"#;
        assert_eq!(read_vendor_error(listed).message, "slow down");
        assert_eq!(
            read_vendor_error(br#"{"detail":"Not Found"}"#).message,
            "Not Found"
        );
        assert_eq!(
            read_vendor_error(br#"{"weird":1}"#).message,
            r#"{"weird":1}"#
        );
        assert_eq!(read_vendor_error(b"null").message, "");
    }
}
