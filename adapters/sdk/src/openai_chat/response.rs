use serde::Serialize;
use serde_json::Value;

use super::names::{finish_reason_from, finish_reason_name};
use super::request::{call_out, CallOut};
use super::usage::{parse_usage, UsageOut};
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
    serde_json::to_value(completion_out(response, meta)).unwrap_or_default()
}

/// [`encode_response`]'s body as JSON text, written without building the
/// tree first (the same text `json::to_bytes` makes of the tree): what a
/// translated answer sends.
pub fn write_response(response: &Response, meta: &Meta) -> Vec<u8> {
    // Serialising these types cannot fail (every key is a string).
    serde_json::to_vec(&completion_out(response, meta)).unwrap_or_default()
}

/// A `chat.completion` body, members by name (as a `Value` keeps them).
#[derive(Serialize)]
struct CompletionOut<'a> {
    choices: [ChoiceOut<'a>; 1],
    created: u64,
    id: String,
    model: &'a str,
    object: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    usage: Option<UsageOut>,
}

#[derive(Serialize)]
struct ChoiceOut<'a> {
    finish_reason: Option<String>,
    index: u32,
    /// Always `null`.
    logprobs: (),
    message: MessageOut<'a>,
}

#[derive(Serialize)]
struct MessageOut<'a> {
    /// `null` when the answer is only tool calls.
    content: Option<String>,
    #[serde(skip_serializing_if = "String::is_empty")]
    reasoning_content: String,
    role: &'static str,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    tool_calls: Vec<CallOut<'a>>,
}

fn completion_out<'a>(response: &'a Response, meta: &'a Meta) -> CompletionOut<'a> {
    let mut text = String::new();
    let mut thinking = String::new();
    let mut tool_calls = Vec::new();
    for b in &response.content {
        match b {
            Block::Text(t) => text.push_str(t),
            Block::Thinking { text, .. } => thinking.push_str(text),
            Block::ToolCall(c) => tool_calls.push(call_out(c)),
            _ => {}
        }
    }
    CompletionOut {
        choices: [ChoiceOut {
            finish_reason: response.finish.as_ref().map(finish_reason_name),
            index: 0,
            logprobs: (),
            message: MessageOut {
                content: (!text.is_empty() || tool_calls.is_empty()).then_some(text),
                reasoning_content: thinking,
                role: "assistant",
                tool_calls,
            },
        }],
        created: response.created.unwrap_or(meta.created),
        id: meta.id("chatcmpl-"),
        model: &meta.model,
        object: "chat.completion",
        usage: response.usage.as_ref().map(UsageOut::of),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::canonical::{FinishReason, Usage};
    use serde_json::json;

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

    #[test]
    fn the_written_text_is_the_trees() {
        let call = ToolCall {
            id: "c1".into(),
            name: "f".into(),
            arguments: "{\"q\":1}".into(),
        };
        let answers = [
            Response::default(),
            Response {
                id: Some("up".into()),
                created: Some(9),
                content: vec![
                    Block::Thinking {
                        text: "why".into(),
                        signature: Some("sig".into()),
                    },
                    Block::Text("say \"hi\"\n".into()),
                    Block::Text(" and more".into()),
                    Block::ToolCall(call.clone()),
                ],
                finish: Some(crate::canonical::FinishReason::ToolCalls),
                usage: Some(crate::canonical::Usage {
                    input_tokens: 30,
                    output_tokens: 5,
                    cache_read_tokens: 10,
                    cache_write_tokens: 2,
                    reasoning_tokens: 1,
                }),
                ..Response::default()
            },
            Response {
                content: vec![Block::ToolCall(call)],
                finish: Some(crate::canonical::FinishReason::Other("paused".into())),
                usage: Some(crate::canonical::Usage::default()),
                ..Response::default()
            },
        ];
        for r in &answers {
            let tree = encode_response(r, &meta());
            assert_eq!(
                write_response(r, &meta()),
                crate::json::to_bytes(&tree),
                "{tree}"
            );
        }
        assert_eq!(
            encode_response(&answers[1], &meta()),
            json!({"id": "chatcmpl-req_1", "object": "chat.completion", "created": 9, "model": "client",
                   "choices": [{"index": 0, "logprobs": null, "finish_reason": "tool_calls",
                                "message": {"role": "assistant", "content": "say \"hi\"\n and more",
                                            "reasoning_content": "why",
                                            "tool_calls": [{"id": "c1", "type": "function",
                                                            "function": {"name": "f", "arguments": "{\"q\":1}"}}]}}],
                   "usage": {"prompt_tokens": 30, "completion_tokens": 5, "total_tokens": 35,
                             "prompt_tokens_details": {"cached_tokens": 10, "cache_write_tokens": 2},
                             "completion_tokens_details": {"reasoning_tokens": 1}}})
        );
        assert_eq!(
            encode_response(&answers[2], &meta()),
            json!({"id": "chatcmpl-req_1", "object": "chat.completion", "created": 5, "model": "client",
                   "choices": [{"index": 0, "logprobs": null, "finish_reason": "paused",
                                "message": {"role": "assistant", "content": null,
                                            "tool_calls": [{"id": "c1", "type": "function",
                                                            "function": {"name": "f", "arguments": "{\"q\":1}"}}]}}],
                   "usage": {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0,
                             "prompt_tokens_details": {"cached_tokens": 0},
                             "completion_tokens_details": {"reasoning_tokens": 0}}})
        );
        assert_eq!(
            encode_response(&answers[0], &meta())["choices"][0],
            json!({"index": 0, "logprobs": null, "finish_reason": null,
                   "message": {"role": "assistant", "content": ""}})
        );
    }
}
