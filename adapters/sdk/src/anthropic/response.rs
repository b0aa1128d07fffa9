use serde_json::{json, Value};

use super::{finish_reason_from, finish_reason_name};
use crate::canonical::{Block, Meta, Response, ToolCall, Usage};
use crate::json::{arguments_object, count_member, str_member};
use crate::TranslateError;

/// Reads an Anthropic `usage` object into canonical terms (cache reads and
/// writes are added to `input_tokens`).
pub fn parse_usage(u: &Value) -> Option<Usage> {
    if !u.is_object() {
        return None;
    }
    let read = count_member(u, "cache_read_input_tokens").unwrap_or(0);
    let write = count_member(u, "cache_creation_input_tokens").unwrap_or(0);
    Some(Usage {
        input_tokens: count_member(u, "input_tokens").unwrap_or(0) + read + write,
        output_tokens: count_member(u, "output_tokens").unwrap_or(0),
        cache_read_tokens: read,
        cache_write_tokens: write,
        // Anthropic counts thinking inside output_tokens without a separate figure.
        reasoning_tokens: 0,
    })
}

/// Writes an Anthropic `usage` object.
pub fn encode_usage(u: &Usage) -> Value {
    json!({
        "input_tokens": u.uncached_input_tokens(),
        "output_tokens": u.output_tokens,
        "cache_creation_input_tokens": u.cache_write_tokens,
        "cache_read_input_tokens": u.cache_read_tokens,
    })
}

/// Reads a `message` body.
pub fn parse_response(body: &Value) -> Result<Response, TranslateError> {
    let blocks = body
        .get("content")
        .and_then(Value::as_array)
        .ok_or_else(|| TranslateError::upstream("the message has no `content` array"))?;
    let mut content = Vec::new();
    for b in blocks {
        match str_member(b, "type") {
            Some("text") => content.push(Block::Text(
                str_member(b, "text").unwrap_or_default().to_owned(),
            )),
            Some("thinking") => content.push(Block::Thinking {
                text: str_member(b, "thinking").unwrap_or_default().to_owned(),
                signature: str_member(b, "signature")
                    .filter(|s| !s.is_empty())
                    .map(str::to_owned),
            }),
            Some("redacted_thinking") => content.push(Block::RedactedThinking(
                str_member(b, "data").unwrap_or_default().to_owned(),
            )),
            Some("tool_use") => content.push(Block::ToolCall(ToolCall {
                id: str_member(b, "id").unwrap_or_default().to_owned(),
                name: str_member(b, "name").unwrap_or_default().to_owned(),
                arguments: b
                    .get("input")
                    .map(Value::to_string)
                    .unwrap_or_else(|| "{}".to_owned()),
            })),
            // Server tool blocks and citations mean nothing to other protocols.
            _ => {}
        }
    }
    Ok(Response {
        id: str_member(body, "id").map(str::to_owned),
        model: str_member(body, "model").map(str::to_owned),
        created: None,
        content,
        finish: str_member(body, "stop_reason")
            .map(|r| finish_reason_from(r, str_member(body, "stop_sequence"))),
        usage: body.get("usage").and_then(parse_usage),
    })
}

pub(super) fn encode_block(b: &Block) -> Option<Value> {
    Some(match b {
        Block::Text(t) => json!({"type": "text", "text": t}),
        Block::Thinking { text, signature } => json!({"type": "thinking", "thinking": text,
            "signature": signature.clone().unwrap_or_default()}),
        Block::RedactedThinking(d) => json!({"type": "redacted_thinking", "data": d}),
        Block::ToolCall(c) => json!({"type": "tool_use", "id": c.id, "name": c.name,
            "input": arguments_object(&c.arguments)}),
        Block::Image(_) | Block::ToolResult(_) => return None,
    })
}

/// Writes a `message` body for an Anthropic client.
pub fn encode_response(r: &Response, meta: &Meta) -> Value {
    let (stop_reason, stop_sequence) = match &r.finish {
        Some(f) => {
            let (n, s) = finish_reason_name(f);
            (Some(n), s)
        }
        None => (None, None),
    };
    json!({
        "id": meta.id("msg_"),
        "type": "message",
        "role": "assistant",
        "model": meta.model,
        "content": r.content.iter().filter_map(encode_block).collect::<Vec<_>>(),
        "stop_reason": stop_reason,
        "stop_sequence": stop_sequence,
        "usage": encode_usage(&r.usage.unwrap_or_default()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::canonical::FinishReason;

    #[test]
    fn cache_tokens_are_added_to_input_and_taken_off_again() {
        let u = parse_usage(&json!({"input_tokens": 10, "output_tokens": 5,
            "cache_read_input_tokens": 100, "cache_creation_input_tokens": 20}))
        .unwrap();
        assert_eq!(
            u,
            Usage {
                input_tokens: 130,
                output_tokens: 5,
                cache_read_tokens: 100,
                cache_write_tokens: 20,
                reasoning_tokens: 0
            }
        );
        assert_eq!(
            encode_usage(&u),
            json!({"input_tokens": 10, "output_tokens": 5,
                   "cache_creation_input_tokens": 20, "cache_read_input_tokens": 100})
        );
    }

    #[test]
    fn message_round_trip() {
        let body = json!({"id": "msg_1", "type": "message", "role": "assistant", "model": "c",
            "content": [{"type": "thinking", "thinking": "t", "signature": "s"},
                        {"type": "text", "text": "hi"},
                        {"type": "tool_use", "id": "toolu_1", "name": "f", "input": {"q": "x"}}],
            "stop_reason": "stop_sequence", "stop_sequence": "END",
            "usage": {"input_tokens": 1, "output_tokens": 2}});
        let r = parse_response(&body).unwrap();
        assert_eq!(
            r.finish,
            Some(FinishReason::StopSequence(Some("END".into())))
        );
        let meta = Meta {
            request_id: "req_9".into(),
            model: "client".into(),
            created: 0,
            wants_usage: false,
        };
        let out = encode_response(&r, &meta);
        assert_eq!(out["content"], body["content"]);
        assert_eq!(out["stop_reason"], "stop_sequence");
        assert_eq!(out["stop_sequence"], "END");
        assert_eq!(out["id"], "msg_req_9");
        assert_eq!(out["model"], "client");
    }
}
