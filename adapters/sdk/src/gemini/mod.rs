//! The Gemini generateContent codec: canonical form ⇄ Gemini JSON, both ways
//! (request, response, stream), and the same-protocol passthrough.
//!
//! - Keys are read in camelCase or snake_case at every level, as protobuf
//!   JSON allows and the google-genai SDK sends (`thinking_budget` inside
//!   `thinkingConfig`); they are written in camelCase.
//! - The model and whether the call streams are in the URL, not the body.
//! - Usage: `promptTokenCount` includes `cachedContentTokenCount`;
//!   `candidatesTokenCount` excludes `thoughtsTokenCount`, which the
//!   canonical `output_tokens` includes.
//! - Function calls may come without ids: they get ids derived from the
//!   request id, and a function response without an id answers the earliest
//!   unanswered call of the same name.
//! - A `thoughtSignature` may sit on any part. Read: on a thought part it is
//!   that thought's signature; on another part it signs the thought before it
//!   (or stands alone as a signature-only thought). Written: on the thought
//!   part it belongs to.

mod parts;
mod passthrough;
mod request;
mod response;
mod stream;

pub use passthrough::{finish_response, StreamRelay};
pub use request::{encode_request, parse_request};
pub use response::{encode_response, parse_response, parse_usage};
pub use stream::{StreamEncoder, StreamParser};

use serde_json::Value;

use crate::canonical::FinishReason;

/// `key` (camelCase) of a JSON object, or its snake_case spelling.
pub fn key<'a>(value: &'a Value, camel: &str) -> Option<&'a Value> {
    let object = value.as_object()?;
    if let Some(v) = object.get(camel).filter(|v| !v.is_null()) {
        return Some(v);
    }
    object.get(&snake_case(camel)).filter(|v| !v.is_null())
}

/// The JSON pointer (RFC 6901) of a nested key path written in camelCase,
/// following each level in whichever spelling the body uses; for policies,
/// which must edit Gemini bodies as the client spelled them.
pub fn pointer(body: &Value, camel_path: &[&str]) -> Option<String> {
    let mut at = body;
    let mut out = String::new();
    for k in camel_path {
        let object = at.as_object()?;
        let snake = snake_case(k);
        let (name, next) = object
            .get_key_value(*k)
            .or_else(|| object.get_key_value(snake.as_str()))?;
        out.push('/');
        out.push_str(&name.replace('~', "~0").replace('/', "~1"));
        at = next;
    }
    Some(out)
}

fn snake_case(camel: &str) -> String {
    let mut snake = String::with_capacity(camel.len() + 4);
    for c in camel.chars() {
        if c.is_ascii_uppercase() {
            snake.push('_');
            snake.push(c.to_ascii_lowercase());
        } else {
            snake.push(c);
        }
    }
    snake
}

pub(crate) fn key_str<'a>(value: &'a Value, camel: &str) -> Option<&'a str> {
    key(value, camel).and_then(Value::as_str)
}

/// Reads a finish reason. `STOP` after function calls means the calls.
pub fn finish_reason_from(reason: &str, has_calls: bool) -> FinishReason {
    match reason {
        "STOP" if has_calls => FinishReason::ToolCalls,
        "STOP" => FinishReason::Stop,
        "MAX_TOKENS" => FinishReason::Length,
        "SAFETY" | "RECITATION" | "BLOCKLIST" | "PROHIBITED_CONTENT" | "SPII" | "IMAGE_SAFETY" => {
            FinishReason::ContentFilter
        }
        other => FinishReason::Other(other.to_owned()),
    }
}

/// The Gemini word. Gemini says `STOP` for finished calls and stop
/// sequences; a reason of another protocol it has no word for is `OTHER`.
pub fn finish_reason_name(reason: &FinishReason) -> String {
    match reason {
        FinishReason::Stop | FinishReason::ToolCalls | FinishReason::StopSequence(_) => "STOP",
        FinishReason::Length => "MAX_TOKENS",
        FinishReason::ContentFilter | FinishReason::Refusal => "SAFETY",
        FinishReason::Other(raw)
            if raw
                .chars()
                .all(|c| c.is_ascii_uppercase() || c == '_' || c.is_ascii_digit()) =>
        {
            raw
        }
        FinishReason::Other(_) => "OTHER",
    }
    .to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn keys_in_either_spelling() {
        let v = json!({"thinking_budget": 0, "includeThoughts": true});
        assert_eq!(key(&v, "thinkingBudget"), Some(&json!(0)));
        assert_eq!(key(&v, "includeThoughts"), Some(&json!(true)));
        assert_eq!(key(&v, "maxOutputTokens"), None);
    }

    #[test]
    fn pointers_follow_the_bodys_spelling() {
        let v = json!({"generation_config": {"thinkingConfig": {"thinking_budget": 0}}});
        assert_eq!(
            pointer(
                &v,
                &["generationConfig", "thinkingConfig", "thinkingBudget"]
            )
            .as_deref(),
            Some("/generation_config/thinkingConfig/thinking_budget")
        );
        assert_eq!(pointer(&v, &["generationConfig", "temperature"]), None);
    }

    #[test]
    fn finish_reasons() {
        assert_eq!(finish_reason_from("STOP", true), FinishReason::ToolCalls);
        assert_eq!(
            finish_reason_from("MALFORMED_FUNCTION_CALL", false),
            FinishReason::Other("MALFORMED_FUNCTION_CALL".into())
        );
        assert_eq!(
            finish_reason_name(&FinishReason::Other("pause_turn".into())),
            "OTHER"
        );
        assert_eq!(
            finish_reason_name(&FinishReason::Other("MALFORMED_FUNCTION_CALL".into())),
            "MALFORMED_FUNCTION_CALL"
        );
    }
}
