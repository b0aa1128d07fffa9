use serde_json::Value;

use crate::canonical::Usage;
use crate::errors::read_vendor_error;
use crate::json::{parse_upstream_object, set_model, to_bytes};
use crate::openai_chat::{ensure_usage_details, parse_usage};
use crate::TranslateError;

/// The client's answer body and the usage to bill.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FinishedResponse {
    pub body: Vec<u8>,
    pub usage: Option<Usage>,
}

/// Renames the model back to the client's name and fills in the usage
/// details clients expect (spec §2.8).
pub fn finish_response(
    body: &[u8],
    client_model: &str,
) -> Result<FinishedResponse, TranslateError> {
    let mut value = parse_upstream_object(body)?;
    // Some OpenAI-compatible vendors answer 200 with an error body; passing
    // it on as a success would bill nothing and confuse the client.
    if value.get("error").is_some_and(|e| !e.is_null()) && value.get("choices").is_none() {
        let vendor = read_vendor_error(body);
        return Err(TranslateError::upstream(format!(
            "vendor answered success with an error: {}",
            vendor.message
        )));
    }
    set_model(&mut value, client_model);
    let usage = match value.get_mut("usage") {
        Some(usage @ Value::Object(_)) => {
            ensure_usage_details(usage);
            parse_usage(usage)
        }
        _ => None,
    };
    Ok(FinishedResponse {
        body: to_bytes(&value),
        usage,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn renames_model_and_fills_usage_details() {
        let vendor = json!({
            "id": "x", "object": "chat.completion", "model": "up-model",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": "hi"},
                         "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 9, "completion_tokens": 2, "total_tokens": 11},
            "system_fingerprint": "fp"
        });
        let finished = finish_response(vendor.to_string().as_bytes(), "client").unwrap();
        let body: Value = serde_json::from_slice(&finished.body).unwrap();
        assert_eq!(body["model"], "client");
        assert_eq!(body["system_fingerprint"], "fp");
        assert_eq!(
            body["usage"]["prompt_tokens_details"],
            json!({"cached_tokens": 0})
        );
        assert_eq!(
            body["usage"]["completion_tokens_details"],
            json!({"reasoning_tokens": 0})
        );
        assert_eq!(
            finished.usage,
            Some(Usage {
                input_tokens: 9,
                output_tokens: 2,
                cache_read_tokens: 0,
                cache_write_tokens: 0,
                reasoning_tokens: 0,
            })
        );
    }

    #[test]
    fn missing_usage_is_none() {
        let finished = finish_response(br#"{"choices":[]}"#, "c").unwrap();
        assert_eq!(finished.usage, None);
    }

    #[test]
    fn unreadable_answers_are_upstream_errors() {
        for body in [&b"not json"[..], b"[1]", br#"{"error":{"message":"boom"}}"#] {
            assert!(matches!(
                finish_response(body, "c"),
                Err(TranslateError::UpstreamFormat(_))
            ));
        }
    }
}
