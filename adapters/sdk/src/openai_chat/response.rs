use serde_json::{json, Map, Value};

use super::names::{finish_reason_from, finish_reason_name};
use super::request::encode_tool_call;
use super::usage::{encode_usage, parse_usage};
use crate::canonical::{Block, Meta, Response, ToolCall};
use crate::json::{count_member, str_member};
use crate::TranslateError;

/// Reads a `chat.completion` body (its first choice). Every error is the
/// vendor's, so they are all `UpstreamFormat`.
pub fn parse_response(body: &Value) -> Result<Response, TranslateError> {
    if !body.is_object() {
        return Err(TranslateError::upstream("completion is not a JSON object"));
    }
    let choice = match body.get("choices") {
        Some(Value::Array(items)) => items.first(),
        _ => {
            return Err(TranslateError::upstream(
                "completion has no `choices` array",
            ))
        }
    };
    let mut content = Vec::new();
    let mut finish = None;
    if let Some(choice) = choice {
        let message = choice
            .get("message")
            .filter(|m| m.is_object())
            .ok_or_else(|| TranslateError::upstream("the choice has no `message` object"))?;
        let reasoning = str_member(message, "reasoning_content")
            .or_else(|| str_member(message, "reasoning"))
            .filter(|r| !r.is_empty());
        if let Some(r) = reasoning {
            content.push(Block::Thinking {
                text: r.to_owned(),
                signature: None,
            });
        }
        if let Some(text) = str_member(message, "content").filter(|t| !t.is_empty()) {
            content.push(Block::Text(text.to_owned()));
        }
        if let Some(refusal) = str_member(message, "refusal").filter(|t| !t.is_empty()) {
            content.push(Block::Text(refusal.to_owned()));
        }
        if let Some(Value::Array(calls)) = message.get("tool_calls") {
            for call in calls {
                let function = call.get("function").unwrap_or(&Value::Null);
                content.push(Block::ToolCall(ToolCall {
                    id: str_member(call, "id").unwrap_or_default().to_owned(),
                    name: str_member(function, "name").unwrap_or_default().to_owned(),
                    arguments: match function.get("arguments") {
                        Some(Value::String(s)) => s.clone(),
                        None | Some(Value::Null) => String::new(),
                        Some(other) => other.to_string(),
                    },
                }));
            }
        }
        finish = str_member(choice, "finish_reason").map(finish_reason_from);
    }
    Ok(Response {
        id: str_member(body, "id").map(str::to_owned),
        model: str_member(body, "model").map(str::to_owned),
        created: count_member(body, "created"),
        content,
        finish,
        usage: body.get("usage").and_then(parse_usage),
    })
}

/// Writes a `chat.completion` body (spec §2.8) with one choice.
pub fn encode_response(response: &Response, meta: &Meta) -> Value {
    let mut message = Map::new();
    message.insert("role".into(), json!("assistant"));
    let text: String = response
        .content
        .iter()
        .filter_map(|b| match b {
            Block::Text(t) => Some(t.as_str()),
            _ => None,
        })
        .collect();
    let thinking: String = response
        .content
        .iter()
        .filter_map(|b| match b {
            Block::Thinking { text, .. } => Some(text.as_str()),
            _ => None,
        })
        .collect();
    let calls: Vec<Value> = response
        .content
        .iter()
        .filter_map(|b| match b {
            Block::ToolCall(c) => Some(encode_tool_call(c)),
            _ => None,
        })
        .collect();
    message.insert(
        "content".into(),
        if text.is_empty() && !calls.is_empty() {
            Value::Null
        } else {
            json!(text)
        },
    );
    if !thinking.is_empty() {
        message.insert("reasoning_content".into(), json!(thinking));
    }
    if !calls.is_empty() {
        message.insert("tool_calls".into(), Value::Array(calls));
    }
    let mut out = Map::new();
    out.insert("id".into(), json!(meta.id("chatcmpl-")));
    out.insert("object".into(), json!("chat.completion"));
    out.insert(
        "created".into(),
        json!(response.created.unwrap_or(meta.created)),
    );
    out.insert("model".into(), json!(meta.model));
    out.insert(
        "choices".into(),
        json!([{
            "index": 0,
            "message": message,
            "logprobs": null,
            "finish_reason": response.finish.as_ref().map(finish_reason_name),
        }]),
    );
    if let Some(usage) = &response.usage {
        out.insert("usage".into(), encode_usage(usage));
    }
    Value::Object(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::canonical::{FinishReason, Usage};

    fn meta() -> Meta {
        Meta {
            request_id: "req_1".into(),
            model: "client".into(),
            created: 5,
            wants_usage: false,
        }
    }

    #[test]
    fn reads_and_writes_the_first_choice() {
        let vendor = json!({
            "id": "x", "object": "chat.completion", "created": 7, "model": "up",
            "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {
                "role": "assistant", "content": "", "reasoning_content": "why",
                "tool_calls": [{"id": "c", "type": "function", "function": {"name": "f", "arguments": "{\"q\":1}"}}]}}],
            "usage": {"prompt_tokens": 10, "completion_tokens": 4,
                      "prompt_tokens_details": {"cached_tokens": 3},
                      "completion_tokens_details": {"reasoning_tokens": 1}}
        });
        let r = parse_response(&vendor).unwrap();
        assert_eq!(r.finish, Some(FinishReason::ToolCalls));
        assert_eq!(
            r.usage,
            Some(Usage {
                input_tokens: 10,
                output_tokens: 4,
                cache_read_tokens: 3,
                cache_write_tokens: 0,
                reasoning_tokens: 1
            })
        );
        let out = encode_response(&r, &meta());
        assert_eq!(out["id"], "chatcmpl-req_1");
        assert_eq!(out["model"], "client");
        assert_eq!(out["created"], 7);
        let m = &out["choices"][0]["message"];
        assert_eq!(m["content"], Value::Null);
        assert_eq!(m["reasoning_content"], "why");
        assert_eq!(m["tool_calls"][0]["function"]["arguments"], "{\"q\":1}");
        assert_eq!(out["choices"][0]["finish_reason"], "tool_calls");
        assert_eq!(out["usage"]["prompt_tokens_details"]["cached_tokens"], 3);
    }

    #[test]
    fn garbage_is_upstream_format() {
        for body in [
            json!([1]),
            json!({"x": 1}),
            json!({"choices": [{"message": 3}]}),
        ] {
            assert!(matches!(
                parse_response(&body),
                Err(TranslateError::UpstreamFormat(_))
            ));
        }
    }
}
