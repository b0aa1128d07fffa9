use serde_json::{json, Map, Value};

use super::parts::{encode_parts, parse_parts, CallIds};
use super::{finish_reason_from, finish_reason_name, key, key_str};
use crate::canonical::{Block, FinishReason, Meta, Response, Usage};
use crate::json::as_count;
use crate::TranslateError;

/// Reads `usageMetadata` into canonical terms: thoughts join the output,
/// tool-use prompt tokens the input.
pub fn parse_usage(u: &Value) -> Option<Usage> {
    if !u.is_object() {
        return None;
    }
    let n = |k: &str| key(u, k).and_then(as_count).unwrap_or(0);
    let thoughts = n("thoughtsTokenCount");
    Some(
        Usage {
            input_tokens: n("promptTokenCount") + n("toolUsePromptTokenCount"),
            output_tokens: n("candidatesTokenCount") + thoughts,
            cache_read_tokens: n("cachedContentTokenCount"),
            cache_write_tokens: 0,
            reasoning_tokens: thoughts,
        }
        .consistent(),
    )
}

/// Writes `usageMetadata`.
pub fn encode_usage(u: &Usage) -> Value {
    let mut out = Map::new();
    out.insert("promptTokenCount".into(), json!(u.input_tokens));
    out.insert(
        "candidatesTokenCount".into(),
        json!(u.output_tokens - u.reasoning_tokens.min(u.output_tokens)),
    );
    out.insert("totalTokenCount".into(), json!(u.total_tokens()));
    if u.cache_read_tokens > 0 {
        out.insert("cachedContentTokenCount".into(), json!(u.cache_read_tokens));
    }
    if u.reasoning_tokens > 0 {
        out.insert("thoughtsTokenCount".into(), json!(u.reasoning_tokens));
    }
    Value::Object(out)
}

/// The ids given to function calls a Gemini vendor sent without one.
pub(super) fn vendor_call_ids(request_id: &str) -> CallIds {
    CallIds::new(format!("call_{request_id}_"))
}

/// Reads a `GenerateContentResponse` (its first candidate).
pub fn parse_response(body: &Value, request_id: &str) -> Result<Response, TranslateError> {
    if !body.is_object() {
        return Err(TranslateError::upstream("the answer is not a JSON object"));
    }
    let candidate = key(body, "candidates")
        .and_then(Value::as_array)
        .and_then(|c| c.first());
    let mut content = Vec::new();
    let mut finish = None;
    let mut ids = vendor_call_ids(request_id);
    match candidate {
        Some(c) => {
            if let Some(parts) = key(c, "content")
                .and_then(|content| key(content, "parts"))
                .and_then(Value::as_array)
            {
                content = parse_parts(parts, &mut ids)?;
            }
            let has_calls = content.iter().any(|b| matches!(b, Block::ToolCall(_)));
            finish = key_str(c, "finishReason").map(|r| finish_reason_from(r, has_calls));
        }
        None => {
            // A prompt the vendor blocked has feedback and no candidates.
            if key(body, "promptFeedback")
                .and_then(|f| key(f, "blockReason"))
                .is_some()
            {
                finish = Some(FinishReason::ContentFilter);
            }
        }
    }
    Ok(Response {
        id: key_str(body, "responseId").map(str::to_owned),
        model: key_str(body, "modelVersion").map(str::to_owned),
        created: None,
        content,
        finish,
        usage: key(body, "usageMetadata").and_then(parse_usage),
    })
}

/// One candidate with these parts.
pub(super) fn candidate(parts: Vec<Value>, finish: Option<&FinishReason>) -> Value {
    let mut c = json!({"content": {"role": "model", "parts": parts}, "index": 0});
    if let Some(f) = finish {
        c["finishReason"] = json!(finish_reason_name(f));
    }
    c
}

/// Writes a `GenerateContentResponse` for a Gemini client.
pub fn encode_response(r: &Response, meta: &Meta) -> Value {
    let parts = encode_parts(&r.content, &|_| None);
    let mut out = json!({
        "candidates": [candidate(parts, Some(r.finish.as_ref().unwrap_or(&FinishReason::Stop)))],
        "modelVersion": meta.model,
        "responseId": meta.request_id,
    });
    if let Some(u) = &r.usage {
        out["usageMetadata"] = encode_usage(u);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::canonical::ToolCall;

    #[test]
    fn usage_adds_thoughts_to_output() {
        let u = parse_usage(&json!({"promptTokenCount": 10, "candidatesTokenCount": 3,
            "thoughtsTokenCount": 8, "cachedContentTokenCount": 4, "totalTokenCount": 21}))
        .unwrap();
        assert_eq!(
            u,
            Usage {
                input_tokens: 10,
                output_tokens: 11,
                cache_read_tokens: 4,
                cache_write_tokens: 0,
                reasoning_tokens: 8
            }
        );
        assert_eq!(encode_usage(&u)["candidatesTokenCount"], 3);
        assert_eq!(encode_usage(&u)["totalTokenCount"], 21);
    }

    #[test]
    fn calls_without_ids_get_them_and_stop_means_the_calls() {
        let body = json!({"candidates": [{"content": {"role": "model", "parts": [
            {"functionCall": {"name": "f", "args": {"a": "b"}}}]}, "finishReason": "STOP"}],
            "usageMetadata": {"promptTokenCount": 1, "candidatesTokenCount": 1}});
        let r = parse_response(&body, "req_7").unwrap();
        assert_eq!(r.finish, Some(FinishReason::ToolCalls));
        assert_eq!(
            r.content,
            vec![Block::ToolCall(ToolCall {
                id: "call_req_7_0".into(),
                name: "f".into(),
                arguments: "{\"a\":\"b\"}".into()
            })]
        );
        let out = encode_response(
            &r,
            &Meta {
                request_id: "req_7".into(),
                model: "gm".into(),
                created: 0,
                wants_usage: false,
            },
        );
        assert_eq!(out["candidates"][0]["finishReason"], "STOP");
        assert_eq!(
            out["candidates"][0]["content"]["parts"][0]["functionCall"]["args"],
            json!({"a": "b"})
        );
        assert_eq!(out["modelVersion"], "gm");
    }

    #[test]
    fn a_blocked_prompt_is_a_content_filter_finish() {
        let r = parse_response(&json!({"promptFeedback": {"blockReason": "SAFETY"}}), "r").unwrap();
        assert_eq!(r.finish, Some(FinishReason::ContentFilter));
    }
}
