use serde::Serialize;
use serde_json::Value;

use super::request::BlockOut;
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
    serde_json::to_value(UsageOut::of(u)).unwrap_or_default()
}

/// An Anthropic `usage` object, its members in the order a `Value` keeps
/// them (by name), so the typed and the tree writing give the same text.
#[derive(Serialize)]
struct UsageOut {
    cache_creation_input_tokens: u64,
    cache_read_input_tokens: u64,
    input_tokens: u64,
    output_tokens: u64,
}

impl UsageOut {
    fn of(u: &Usage) -> Self {
        UsageOut {
            cache_creation_input_tokens: u.cache_write_tokens,
            cache_read_input_tokens: u.cache_read_tokens,
            input_tokens: u.uncached_input_tokens(),
            output_tokens: u.output_tokens,
        }
    }
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

/// A `message` body, written straight from the canonical answer (see
/// [`write_response`]); members by name, as in a `Value`.
#[derive(Serialize)]
struct MessageOut<'a> {
    content: Vec<BlockOut<'a>>,
    id: String,
    model: &'a str,
    role: &'static str,
    stop_reason: Option<String>,
    stop_sequence: Option<String>,
    #[serde(rename = "type")]
    kind: &'static str,
    usage: UsageOut,
}

/// A block of the answer as a Messages body writes it (the request's own
/// block type), except that thinking without a signature is kept, with an
/// empty one; images and tool results are no answer's.
fn block_out(b: &Block) -> Option<BlockOut<'_>> {
    Some(match b {
        Block::Text(text) => BlockOut::Text { text, kind: "text" },
        Block::Thinking { text, signature } => BlockOut::Thinking {
            signature: signature.as_deref().unwrap_or_default(),
            thinking: text,
            kind: "thinking",
        },
        Block::RedactedThinking(data) => BlockOut::Redacted {
            data,
            kind: "redacted_thinking",
        },
        Block::ToolCall(c) => BlockOut::ToolUse {
            id: &c.id,
            input: arguments_object(&c.arguments),
            name: &c.name,
            kind: "tool_use",
        },
        Block::Image(_) | Block::ToolResult(_) => return None,
    })
}

fn message_out<'a>(r: &'a Response, meta: &'a Meta) -> MessageOut<'a> {
    let (stop_reason, stop_sequence) = match &r.finish {
        Some(f) => {
            let (n, s) = finish_reason_name(f);
            (Some(n), s)
        }
        None => (None, None),
    };
    MessageOut {
        content: r.content.iter().filter_map(block_out).collect(),
        id: meta.id("msg_"),
        model: &meta.model,
        role: "assistant",
        stop_reason,
        stop_sequence,
        kind: "message",
        usage: UsageOut::of(&r.usage.unwrap_or_default()),
    }
}

/// Writes a `message` body for an Anthropic client.
pub fn encode_response(r: &Response, meta: &Meta) -> Value {
    serde_json::to_value(message_out(r, meta)).unwrap_or_default()
}

/// [`encode_response`]'s body as JSON text, written without building the
/// tree first (the same text `json::to_bytes` makes of the tree): what a
/// translated answer sends.
pub fn write_response(r: &Response, meta: &Meta) -> Vec<u8> {
    // Serialising these types cannot fail (every key is a string).
    serde_json::to_vec(&message_out(r, meta)).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::canonical::FinishReason;
    use serde_json::json;

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

    #[test]
    fn the_written_text_is_the_trees() {
        let meta = Meta {
            request_id: "req_2".into(),
            model: "claude-client".into(),
            created: 0,
            wants_usage: false,
        };
        let blocks = vec![
            Block::Thinking {
                text: "t".into(),
                signature: None,
            },
            Block::RedactedThinking("opaque".into()),
            Block::Text("say \"hi\"\n".into()),
            Block::Image(crate::canonical::ImageSource::Url("u".into())),
            Block::ToolCall(ToolCall {
                id: "call_1".into(),
                name: "f".into(),
                arguments: "{\"b\":1,\"a\":[2]}".into(),
            }),
            Block::ToolCall(ToolCall {
                id: "call_2".into(),
                name: "g".into(),
                arguments: "not json".into(),
            }),
        ];
        let answers = [
            Response::default(),
            Response {
                content: blocks,
                finish: Some(FinishReason::StopSequence(Some("END".into()))),
                usage: Some(Usage {
                    input_tokens: 30,
                    output_tokens: 5,
                    cache_read_tokens: 10,
                    cache_write_tokens: 2,
                    reasoning_tokens: 1,
                }),
                ..Response::default()
            },
            Response {
                content: vec![Block::Text("plain".into())],
                finish: Some(FinishReason::Other("pause_turn".into())),
                ..Response::default()
            },
        ];
        for r in &answers {
            let tree = encode_response(r, &meta);
            assert_eq!(
                write_response(r, &meta),
                crate::json::to_bytes(&tree),
                "{tree}"
            );
        }
        assert_eq!(
            encode_response(&answers[2], &meta),
            json!({"id": "msg_req_2", "type": "message", "role": "assistant",
                   "model": "claude-client",
                   "content": [{"type": "text", "text": "plain"}],
                   "stop_reason": "pause_turn", "stop_sequence": null,
                   "usage": {"input_tokens": 0, "output_tokens": 0,
                             "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}})
        );
        let tree = encode_response(&answers[1], &meta);
        assert_eq!(
            tree["content"],
            json!([{"type": "thinking", "thinking": "t", "signature": ""},
                   {"type": "redacted_thinking", "data": "opaque"},
                   {"type": "text", "text": "say \"hi\"\n"},
                   {"type": "tool_use", "id": "call_1", "name": "f", "input": {"a": [2], "b": 1}},
                   {"type": "tool_use", "id": "call_2", "name": "g", "input": {"arguments": "not json"}}])
        );
        assert_eq!(
            tree["usage"],
            json!({"input_tokens": 18, "output_tokens": 5,
                   "cache_creation_input_tokens": 2, "cache_read_input_tokens": 10})
        );
    }
}
