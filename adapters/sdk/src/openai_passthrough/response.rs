use std::collections::BTreeMap;

use serde_json::value::RawValue;
use serde_json::Value;

use super::{raw, read_usage};
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
///
/// Only `model` and `usage` change, so only they are parsed: the other
/// top-level members (the choices, with all their text) are checked as
/// JSON and copied as the vendor wrote them, rather than built into a tree
/// and written out again, which was most of a passthrough answer's guest
/// time. Members come out in key order, as from a parsed object. A body
/// that is not a JSON object, or has a key written with an escape, takes
/// the whole parse (the keys are borrowed from the body, which saves an
/// allocation each). A usage that already has its details goes out as the
/// vendor wrote it.
pub fn finish_response(
    body: &[u8],
    client_model: &str,
) -> Result<FinishedResponse, TranslateError> {
    let Ok(mut members) = serde_json::from_slice::<BTreeMap<&str, &RawValue>>(body) else {
        return finish_parsed(body, client_model);
    };
    // Some OpenAI-compatible vendors answer 200 with an error body; passing
    // it on as a success would bill nothing and confuse the client.
    if members.get("error").is_some_and(|e| e.get() != "null") && !members.contains_key("choices") {
        return Err(vendor_error(body));
    }
    let Some(model) = raw(&Value::from(client_model)) else {
        return finish_parsed(body, client_model);
    };
    members.insert("model", &model);
    let mut usage = None;
    let filled;
    if let Some(read) = members.get("usage").and_then(|u| read_usage(u)) {
        usage = read.billed;
        filled = read.filled;
        if let Some(text) = &filled {
            members.insert("usage", text);
        }
    }
    Ok(FinishedResponse {
        body: serde_json::to_vec(&members).unwrap_or_default(),
        usage,
    })
}

fn vendor_error(body: &[u8]) -> TranslateError {
    let vendor = read_vendor_error(body);
    TranslateError::upstream(format!(
        "vendor answered success with an error: {}",
        vendor.message
    ))
}

/// [`finish_response`] over the whole parsed body.
fn finish_parsed(body: &[u8], client_model: &str) -> Result<FinishedResponse, TranslateError> {
    let mut value = parse_upstream_object(body)?;
    if value.get("error").is_some_and(|e| !e.is_null()) && value.get("choices").is_none() {
        return Err(vendor_error(body));
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
    fn the_spliced_answer_is_the_parsed_one_with_the_vendors_own_text() {
        let bodies = [
            r#"{"id":"x","object":"chat.completion","created":1700000000,"model":"up",
               "choices":[{"index":0,"message":{"role":"assistant","content":"caf\u00e9 \"q\""},
               "logprobs":{"content":[{"token":"a","logprob":-1e-4}]},"finish_reason":"stop"}],
               "usage":{"prompt_tokens":9,"completion_tokens":2,"total_tokens":11,
                        "prompt_tokens_details":{"cached_tokens":4}},
               "system_fingerprint":null}"#,
            r#"{"choices":[],"usage":null}"#,
            r#"{"choices":[],"usage":"n/a","model":"m"}"#,
            r#"{"error":null,"choices":[{"index":0}],"a":1,"a":2}"#,
            r#"  {"b":[1,2,{"c":{}}],"\u006dodel":"escaped key"}  "#,
        ];
        for body in bodies {
            let spliced = finish_response(body.as_bytes(), "client").unwrap();
            let parsed = finish_parsed(body.as_bytes(), "client").unwrap();
            assert_eq!(spliced.usage, parsed.usage, "{body}");
            let a: Value = serde_json::from_slice(&spliced.body).unwrap();
            let b: Value = serde_json::from_slice(&parsed.body).unwrap();
            assert_eq!(a, b, "{body}");
        }
        // The vendor's own spelling of a number survives (a re-serialised
        // tree would write -0.0001).
        let spliced = finish_response(bodies[0].as_bytes(), "client").unwrap();
        assert!(String::from_utf8(spliced.body).unwrap().contains("-1e-4"));
    }

    #[test]
    fn a_usage_with_its_details_goes_out_as_written() {
        let usage = r#"{"prompt_tokens": 9, "completion_tokens": 2.0, "total_tokens": 11,
            "prompt_tokens_details": {"cached_tokens": 4, "audio_tokens": 0},
            "completion_tokens_details": {"reasoning_tokens": 1}}"#;
        let body = format!(r#"{{"choices":[],"model":"up","usage":{usage}}}"#);
        let finished = finish_response(body.as_bytes(), "client").unwrap();
        let text = String::from_utf8(finished.body).unwrap();
        assert!(text.contains(usage), "{text}");
        assert!(text.contains(r#""model":"client""#), "{text}");
        assert_eq!(finished.usage.map(|u| u.output_tokens), Some(2));
        assert_eq!(finished.usage.map(|u| u.cache_read_tokens), Some(4));
    }

    #[test]
    fn what_is_not_an_object_fails_as_before() {
        for body in ["[1]", "nope", r#"{"a":1"#, ""] {
            assert_eq!(
                finish_response(body.as_bytes(), "c")
                    .unwrap_err()
                    .to_string(),
                finish_parsed(body.as_bytes(), "c").unwrap_err().to_string()
            );
        }
        let refused = finish_response(br#"{"error":{"message":"no quota"}}"#, "c").unwrap_err();
        assert!(refused.to_string().contains("no quota"), "{refused}");
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
