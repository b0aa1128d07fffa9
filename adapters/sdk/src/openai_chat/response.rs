use serde_json::{json, Map, Value};

use super::names::{finish_reason_from, finish_reason_name};
use super::request::encode_tool_call;
use super::usage::{encode_usage, parse_usage};
use crate::canonical::{ChatResponse, Choice, ToolCall};
use crate::json::{as_count, count_member, str_member};
use crate::TranslateError;

/// Reads a `chat.completion` body. Every error is the vendor's, so they are
/// all `UpstreamFormat`.
pub fn parse_response(body: &Value) -> Result<ChatResponse, TranslateError> {
    if !body.is_object() {
        return Err(TranslateError::upstream("completion is not a JSON object"));
    }
    let choices = match body.get("choices") {
        Some(Value::Array(items)) => items
            .iter()
            .enumerate()
            .map(|(at, item)| parse_choice(at, item))
            .collect::<Result<Vec<_>, _>>()?,
        _ => {
            return Err(TranslateError::upstream(
                "completion has no `choices` array",
            ))
        }
    };
    Ok(ChatResponse {
        id: str_member(body, "id").unwrap_or_default().to_owned(),
        created: count_member(body, "created").unwrap_or(0),
        model: str_member(body, "model").unwrap_or_default().to_owned(),
        choices,
        usage: body.get("usage").and_then(parse_usage),
    })
}

/// Writes a `chat.completion` body (spec §2.8).
pub fn encode_response(response: &ChatResponse) -> Value {
    let mut out = Map::new();
    out.insert("id".into(), json!(response.id));
    out.insert("object".into(), json!("chat.completion"));
    out.insert("created".into(), json!(response.created));
    out.insert("model".into(), json!(response.model));
    out.insert(
        "choices".into(),
        Value::Array(response.choices.iter().map(encode_choice).collect()),
    );
    if let Some(usage) = &response.usage {
        out.insert("usage".into(), encode_usage(usage));
    }
    Value::Object(out)
}

fn parse_choice(at: usize, choice: &Value) -> Result<Choice, TranslateError> {
    let message = choice
        .get("message")
        .filter(|m| m.is_object())
        .ok_or_else(|| TranslateError::upstream(format!("choice {at} has no `message` object")))?;
    let tool_calls = match message.get("tool_calls") {
        Some(Value::Array(calls)) => calls.iter().map(read_tool_call).collect(),
        _ => Vec::new(),
    };
    Ok(Choice {
        index: choice
            .get("index")
            .and_then(as_count)
            .and_then(|i| u32::try_from(i).ok())
            .unwrap_or(at as u32),
        content: str_member(message, "content").map(str::to_owned),
        reasoning: reasoning_text(message).map(str::to_owned),
        tool_calls,
        finish_reason: str_member(choice, "finish_reason").map(finish_reason_from),
    })
}

/// DeepSeek and Qwen say `reasoning_content`, some routers `reasoning`.
pub(super) fn reasoning_text(message: &Value) -> Option<&str> {
    str_member(message, "reasoning_content").or_else(|| str_member(message, "reasoning"))
}

fn read_tool_call(call: &Value) -> ToolCall {
    let function = call.get("function").unwrap_or(&Value::Null);
    ToolCall {
        id: str_member(call, "id").unwrap_or_default().to_owned(),
        name: str_member(function, "name").unwrap_or_default().to_owned(),
        arguments: match function.get("arguments") {
            Some(Value::String(text)) => text.clone(),
            Some(Value::Null) | None => String::new(),
            Some(other) => other.to_string(),
        },
    }
}

fn encode_choice(choice: &Choice) -> Value {
    let mut message = Map::new();
    message.insert("role".into(), json!("assistant"));
    message.insert("content".into(), json!(choice.content));
    if let Some(reasoning) = &choice.reasoning {
        message.insert("reasoning_content".into(), json!(reasoning));
    }
    if !choice.tool_calls.is_empty() {
        message.insert(
            "tool_calls".into(),
            Value::Array(choice.tool_calls.iter().map(encode_tool_call).collect()),
        );
    }
    json!({
        "index": choice.index,
        "message": message,
        "finish_reason": choice.finish_reason.map(finish_reason_name),
        "logprobs": null,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::canonical::{FinishReason, Usage};

    fn vendor_completion() -> Value {
        json!({
            "id": "chatcmpl-1", "object": "chat.completion", "created": 1700000000,
            "model": "vendor-model",
            "choices": [{
                "index": 0,
                "message": {"role": "assistant", "content": "", "reasoning_content": "think",
                            "tool_calls": [{"id": "c1", "type": "function",
                                            "function": {"name": "f", "arguments": "{}"}}]},
                "finish_reason": "tool_calls", "logprobs": null
            }],
            "usage": {"prompt_tokens": 10, "completion_tokens": 20, "total_tokens": 30,
                      "completion_tokens_details": {"reasoning_tokens": 15}}
        })
    }

    #[test]
    fn reads_content_reasoning_tools_and_usage() {
        let response = parse_response(&vendor_completion()).unwrap();
        assert_eq!(response.id, "chatcmpl-1");
        assert_eq!(response.created, 1_700_000_000);
        let choice = &response.choices[0];
        assert_eq!(choice.content.as_deref(), Some(""));
        assert_eq!(choice.reasoning.as_deref(), Some("think"));
        assert_eq!(choice.tool_calls[0].name, "f");
        assert_eq!(choice.finish_reason, Some(FinishReason::ToolCalls));
        assert_eq!(
            response.usage,
            Some(Usage {
                input_tokens: 10,
                output_tokens: 20,
                cache_read_tokens: 0,
                cache_write_tokens: 0,
                reasoning_tokens: 15,
            })
        );
    }

    #[test]
    fn encodes_the_spec_shape() {
        let mut response = parse_response(&vendor_completion()).unwrap();
        response.model = "client-model".into();
        let encoded = encode_response(&response);
        assert_eq!(encoded["object"], "chat.completion");
        assert_eq!(encoded["model"], "client-model");
        assert_eq!(encoded["choices"][0]["finish_reason"], "tool_calls");
        assert_eq!(
            encoded["choices"][0]["message"]["reasoning_content"],
            "think"
        );
        assert_eq!(
            encoded["usage"]["prompt_tokens_details"]["cached_tokens"],
            json!(0)
        );
        assert_eq!(parse_response(&encoded).unwrap(), response);
    }

    #[test]
    fn broken_completions_are_upstream_errors() {
        for body in [
            json!("text"),
            json!({"id": "x"}),
            json!({"choices": [{"index": 0}]}),
        ] {
            assert!(matches!(
                parse_response(&body),
                Err(TranslateError::UpstreamFormat(_))
            ));
        }
    }
}
