use serde_json::{json, Value};

use super::REDACTED_PREFIX;
use crate::canonical::{Block, FinishReason, Meta, Response, ToolCall, Usage};
use crate::json::{count_member, str_member};
use crate::TranslateError;

/// Reads a Responses `usage` object.
pub fn parse_usage(u: &Value) -> Option<Usage> {
    if !u.is_object() {
        return None;
    }
    let detail = |outer: &str, inner: &str| {
        u.get(outer)
            .and_then(|d| count_member(d, inner))
            .unwrap_or(0)
    };
    Some(
        Usage {
            input_tokens: count_member(u, "input_tokens").unwrap_or(0),
            output_tokens: count_member(u, "output_tokens").unwrap_or(0),
            cache_read_tokens: detail("input_tokens_details", "cached_tokens"),
            cache_write_tokens: 0,
            reasoning_tokens: detail("output_tokens_details", "reasoning_tokens"),
        }
        .consistent(),
    )
}

/// Writes a Responses `usage` object.
pub fn encode_usage(u: &Usage) -> Value {
    json!({
        "input_tokens": u.input_tokens,
        "input_tokens_details": {"cached_tokens": u.cache_read_tokens},
        "output_tokens": u.output_tokens,
        "output_tokens_details": {"reasoning_tokens": u.reasoning_tokens},
        "total_tokens": u.total_tokens(),
    })
}

/// The finish a response's status and items say.
pub(super) fn finish_of(
    status: Option<&str>,
    reason: Option<&str>,
    has_calls: bool,
) -> Option<FinishReason> {
    match status {
        Some("completed") if has_calls => Some(FinishReason::ToolCalls),
        Some("completed") => Some(FinishReason::Stop),
        Some("incomplete") => Some(match reason {
            Some("max_output_tokens") => FinishReason::Length,
            Some("content_filter") => FinishReason::ContentFilter,
            Some(other) => FinishReason::Other(other.to_owned()),
            None => FinishReason::Other("incomplete".to_owned()),
        }),
        _ => None,
    }
}

/// Reads one output item into blocks.
pub(super) fn item_blocks(item: &Value) -> Vec<Block> {
    match str_member(item, "type") {
        Some("message") => item
            .get("content")
            .and_then(Value::as_array)
            .map(|parts| {
                parts
                    .iter()
                    .filter_map(|p| {
                        str_member(p, "text")
                            .or_else(|| str_member(p, "refusal"))
                            .map(|t| Block::Text(t.to_owned()))
                    })
                    .collect()
            })
            .unwrap_or_default(),
        Some("reasoning") => {
            let encrypted = str_member(item, "encrypted_content");
            if let Some(d) = encrypted.and_then(|e| e.strip_prefix(REDACTED_PREFIX)) {
                return vec![Block::RedactedThinking(d.to_owned())];
            }
            let text: String = item
                .get("summary")
                .and_then(Value::as_array)
                .map(|s| s.iter().filter_map(|p| str_member(p, "text")).collect())
                .unwrap_or_default();
            vec![Block::Thinking {
                text,
                signature: encrypted.map(str::to_owned),
            }]
        }
        Some("function_call") => vec![Block::ToolCall(ToolCall {
            id: str_member(item, "call_id").unwrap_or_default().to_owned(),
            name: str_member(item, "name").unwrap_or_default().to_owned(),
            arguments: str_member(item, "arguments").unwrap_or_default().to_owned(),
        })],
        _ => Vec::new(),
    }
}

/// Reads a `response` object.
pub fn parse_response(body: &Value) -> Result<Response, TranslateError> {
    if str_member(body, "status") == Some("failed") {
        let error = body.get("error").cloned().unwrap_or(Value::Null);
        return Err(TranslateError::Vendor(
            crate::errors::in_answer_failure_from(&json!({ "error": error })),
        ));
    }
    let output = body
        .get("output")
        .and_then(Value::as_array)
        .ok_or_else(|| TranslateError::upstream("the response has no `output` array"))?;
    let content: Vec<Block> = output.iter().flat_map(item_blocks).collect();
    let has_calls = content.iter().any(|b| matches!(b, Block::ToolCall(_)));
    Ok(Response {
        id: str_member(body, "id").map(str::to_owned),
        model: str_member(body, "model").map(str::to_owned),
        created: count_member(body, "created_at"),
        finish: finish_of(
            str_member(body, "status"),
            body.get("incomplete_details")
                .and_then(|d| str_member(d, "reason")),
            has_calls,
        ),
        content,
        usage: body.get("usage").and_then(parse_usage),
    })
}

/// The `response` object around `output`, for answers and stream lifecycle
/// events alike.
pub(super) fn response_object(
    meta: &Meta,
    created: u64,
    status: &str,
    output: Vec<Value>,
    finish: Option<&FinishReason>,
    usage: Option<&Usage>,
) -> Value {
    let incomplete = match finish {
        Some(FinishReason::Length) => json!({"reason": "max_output_tokens"}),
        Some(FinishReason::ContentFilter) | Some(FinishReason::Refusal) => {
            json!({"reason": "content_filter"})
        }
        Some(FinishReason::Other(raw)) => json!({ "reason": raw }),
        _ => Value::Null,
    };
    json!({
        "id": meta.id("resp_"),
        "object": "response",
        "created_at": created,
        "status": status,
        "model": meta.model,
        "output": output,
        "usage": usage.map(encode_usage),
        "error": null,
        "incomplete_details": incomplete,
        "instructions": null,
        "max_output_tokens": null,
        "metadata": {},
        "parallel_tool_calls": true,
        "previous_response_id": null,
        "reasoning": {"effort": null, "summary": null},
        "store": false,
        "temperature": null,
        "text": {"format": {"type": "text"}},
        "tool_choice": "auto",
        "tools": [],
        "top_p": null,
        "truncation": "disabled",
    })
}

/// The status a finish gives a response.
pub(super) fn status_of(finish: Option<&FinishReason>) -> &'static str {
    match finish {
        Some(FinishReason::Length)
        | Some(FinishReason::ContentFilter)
        | Some(FinishReason::Refusal)
        | Some(FinishReason::Other(_)) => "incomplete",
        _ => "completed",
    }
}

/// Item ids, stable for one call: `<prefix>_<request id>_<output index>`.
pub(super) fn item_id(prefix: &str, meta: &Meta, index: usize) -> String {
    format!("{prefix}_{}_{index}", meta.request_id)
}

pub(super) fn message_item(id: &str, text: &str, status: &str) -> Value {
    json!({"id": id, "type": "message", "status": status, "role": "assistant",
           "content": [{"type": "output_text", "text": text, "annotations": []}]})
}

pub(super) fn reasoning_item(id: &str, text: &str, signature: Option<&str>) -> Value {
    let mut item = json!({"id": id, "type": "reasoning",
        "summary": if text.is_empty() { json!([]) } else { json!([{"type": "summary_text", "text": text}]) }});
    if let Some(s) = signature {
        item["encrypted_content"] = json!(s);
    }
    item
}

pub(super) fn call_item(id: &str, call: &ToolCall, status: &str) -> Value {
    json!({"id": id, "type": "function_call", "status": status, "call_id": call.id,
           "name": call.name, "arguments": call.arguments})
}

/// Writes a `response` object for a Responses client.
pub fn encode_response(r: &Response, meta: &Meta) -> Value {
    let mut output: Vec<Value> = Vec::new();
    let mut text = String::new();
    let flush = |text: &mut String, output: &mut Vec<Value>| {
        if !text.is_empty() {
            let id = item_id("msg", meta, output.len());
            output.push(message_item(&id, text, "completed"));
            text.clear();
        }
    };
    for b in &r.content {
        match b {
            Block::Text(t) => text.push_str(t),
            Block::Thinking { text: t, signature } => {
                flush(&mut text, &mut output);
                let id = item_id("rs", meta, output.len());
                output.push(reasoning_item(&id, t, signature.as_deref()));
            }
            Block::RedactedThinking(d) => {
                flush(&mut text, &mut output);
                let id = item_id("rs", meta, output.len());
                output.push(reasoning_item(
                    &id,
                    "",
                    Some(&format!("{REDACTED_PREFIX}{d}")),
                ));
            }
            Block::ToolCall(c) => {
                flush(&mut text, &mut output);
                let id = item_id("fc", meta, output.len());
                output.push(call_item(&id, c, "completed"));
            }
            Block::Image(_) | Block::ToolResult(_) => {}
        }
    }
    flush(&mut text, &mut output);
    response_object(
        meta,
        r.created.unwrap_or(meta.created),
        status_of(r.finish.as_ref()),
        output,
        r.finish.as_ref(),
        r.usage.as_ref(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn meta() -> Meta {
        Meta {
            request_id: "req_2".into(),
            model: "m".into(),
            created: 9,
            wants_usage: false,
        }
    }

    #[test]
    fn blocks_become_items_in_order_and_back() {
        let r = Response {
            content: vec![
                Block::Thinking {
                    text: "why".into(),
                    signature: Some("sig".into()),
                },
                Block::Text("a".into()),
                Block::Text("b".into()),
                Block::ToolCall(ToolCall {
                    id: "c".into(),
                    name: "f".into(),
                    arguments: "{}".into(),
                }),
                Block::RedactedThinking("opaque".into()),
            ],
            finish: Some(FinishReason::ToolCalls),
            usage: Some(Usage {
                input_tokens: 5,
                output_tokens: 3,
                cache_read_tokens: 1,
                reasoning_tokens: 2,
                cache_write_tokens: 0,
            }),
            ..Response::default()
        };
        let out = encode_response(&r, &meta());
        assert_eq!(out["id"], "resp_req_2");
        assert_eq!(out["status"], "completed");
        let items = out["output"].as_array().unwrap();
        assert_eq!(items.len(), 4);
        assert_eq!(items[0]["id"], "rs_req_2_0");
        assert_eq!(items[1]["content"][0]["text"], "ab");
        assert_eq!(items[2]["call_id"], "c");
        assert_eq!(out["usage"]["input_tokens_details"]["cached_tokens"], 1);
        let back = parse_response(&out).unwrap();
        assert_eq!(back.content[0], r.content[0]);
        assert_eq!(back.content[1], Block::Text("ab".into()));
        assert_eq!(back.content[3], r.content[4]);
        assert_eq!(back.finish, Some(FinishReason::ToolCalls));
        assert_eq!(back.usage, r.usage);
    }

    #[test]
    fn incomplete_answers_say_why() {
        let r = Response {
            finish: Some(FinishReason::Length),
            ..Response::default()
        };
        let out = encode_response(&r, &meta());
        assert_eq!(out["status"], "incomplete");
        assert_eq!(out["incomplete_details"]["reason"], "max_output_tokens");
        assert_eq!(
            parse_response(&out).unwrap().finish,
            Some(FinishReason::Length)
        );
    }
}
