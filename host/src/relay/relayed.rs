//! What a stream has relayed to its client, counted so that a stream cut
//! short on the client's side is billed for the text that went out.
//!
//! A client that disconnects or stops reading (the edge drops it after
//! `write_timeout`) ends its stream: the relay stops reading the vendor —
//! closing the connection is how a vendor learns to stop generating — and
//! releases the guest instance, so the vendor's final usage never arrives.
//! The bill is then what was relayed: the generated text found in the
//! client-protocol events handed to the connection, counted here per
//! protocol (content, reasoning, refusals, tool names and arguments), and
//! turned into tokens by `billing::text::estimate_output_tokens`.
//!
//! Only the events' delta fields are read, never the summaries some
//! protocols repeat at the end (`response.output_text.done`, a completed
//! response), so nothing is counted twice.

use crate::plugins::bindings::types::{Protocol, SseEvent};
use serde_json::Value;

/// Bytes of generated text relayed so far, for one client protocol.
pub struct Relayed {
    protocol: Protocol,
    text_bytes: usize,
}

impl Relayed {
    pub fn new(protocol: Protocol) -> Relayed {
        Relayed {
            protocol,
            text_bytes: 0,
        }
    }

    /// Counts the generated text in events handed to the client.
    pub fn observe(&mut self, events: &[SseEvent]) {
        for ev in events {
            // `[DONE]` and other non-JSON payloads carry no text.
            if let Ok(data) = serde_json::from_str::<Value>(&ev.data) {
                self.text_bytes += text_bytes(self.protocol, &data);
            }
        }
    }

    pub fn output_tokens(&self) -> u64 {
        crate::billing::text::estimate_output_tokens(self.text_bytes)
    }
}

fn len(v: &Value) -> usize {
    v.as_str().map_or(0, str::len)
}

/// The generated text in one event of `protocol`, in bytes.
fn text_bytes(protocol: Protocol, data: &Value) -> usize {
    let each = |v: &Value, f: &dyn Fn(&Value) -> usize| -> usize {
        v.as_array().map_or(0, |items| items.iter().map(f).sum())
    };
    match protocol {
        Protocol::OpenaiChat => each(&data["choices"], &|choice| {
            let d = &choice["delta"];
            len(&d["content"])
                + len(&d["reasoning_content"])
                + len(&d["refusal"])
                + each(&d["tool_calls"], &|call| {
                    len(&call["function"]["name"]) + len(&call["function"]["arguments"])
                })
        }),
        Protocol::OpenaiCompletions => each(&data["choices"], &|choice| len(&choice["text"])),
        Protocol::OpenaiResponses => {
            let kind = data["type"].as_str().unwrap_or("");
            if kind.ends_with(".delta") {
                len(&data["delta"])
            } else if kind == "response.output_item.added" {
                len(&data["item"]["name"])
            } else {
                0
            }
        }
        Protocol::AnthropicMessages => match data["type"].as_str() {
            Some("content_block_delta") => {
                let d = &data["delta"];
                len(&d["text"]) + len(&d["thinking"]) + len(&d["partial_json"])
            }
            Some("content_block_start") => {
                let b = &data["content_block"];
                len(&b["text"]) + len(&b["thinking"]) + len(&b["name"])
            }
            _ => 0,
        },
        Protocol::Gemini => each(&data["candidates"], &|candidate| {
            each(&candidate["content"]["parts"], &|part| {
                let call = &part["functionCall"];
                let args = if call["args"].is_null() {
                    0
                } else {
                    call["args"].to_string().len()
                };
                len(&part["text"]) + len(&call["name"]) + args
            })
        }),
        // The other families do not stream text.
        _ => 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn counted(protocol: Protocol, events: &[Value]) -> usize {
        let mut r = Relayed::new(protocol);
        let events: Vec<SseEvent> = events
            .iter()
            .map(|v| SseEvent {
                event: None,
                data: v.to_string(),
            })
            .collect();
        r.observe(&events);
        r.text_bytes
    }

    #[test]
    fn openai_chat_counts_content_reasoning_refusals_and_tool_calls() {
        let n = counted(
            Protocol::OpenaiChat,
            &[
                json!({"choices": [{"delta": {"role": "assistant", "content": ""}}]}),
                json!({"choices": [{"delta": {"reasoning_content": "hmm "}}]}),
                json!({"choices": [{"delta": {"content": "Hello "}}, {"delta": {"content": "Hi"}}]}),
                json!({"choices": [{"delta": {"refusal": "no"}}]}),
                json!({"choices": [{"delta": {"tool_calls": [{"index": 0, "function": {"name": "find", "arguments": "{\"q\":"}}]}}]}),
                json!({"choices": [{"delta": {}, "finish_reason": "stop"}], "usage": {"completion_tokens": 99}}),
            ],
        );
        assert_eq!(n, 4 + 6 + 2 + 2 + 4 + 5);
        let mut done = Relayed::new(Protocol::OpenaiChat);
        done.observe(&[SseEvent {
            event: None,
            data: "[DONE]".into(),
        }]);
        assert_eq!(done.text_bytes, 0);
    }

    #[test]
    fn completions_count_their_text() {
        let n = counted(
            Protocol::OpenaiCompletions,
            &[json!({"choices": [{"text": "once upon"}]})],
        );
        assert_eq!(n, 9);
    }

    #[test]
    fn responses_count_deltas_and_never_the_summaries() {
        let n = counted(
            Protocol::OpenaiResponses,
            &[
                json!({"type": "response.created", "response": {"output": []}}),
                json!({"type": "response.reasoning_summary_text.delta", "delta": "think"}),
                json!({"type": "response.output_text.delta", "delta": "Hello"}),
                json!({"type": "response.output_text.done", "text": "Hello"}),
                json!({"type": "response.output_item.added", "item": {"type": "function_call", "name": "find"}}),
                json!({"type": "response.function_call_arguments.delta", "delta": "{}"}),
                json!({"type": "response.completed", "response": {"output": [{"content": [{"text": "Hello"}]}]}}),
            ],
        );
        assert_eq!(n, 5 + 5 + 4 + 2);
    }

    #[test]
    fn anthropic_counts_block_starts_and_deltas() {
        let n = counted(
            Protocol::AnthropicMessages,
            &[
                json!({"type": "message_start", "message": {"content": [], "usage": {"output_tokens": 1}}}),
                json!({"type": "content_block_start", "index": 0, "content_block": {"type": "thinking", "thinking": ""}}),
                json!({"type": "content_block_delta", "index": 0, "delta": {"type": "thinking_delta", "thinking": "hmm"}}),
                json!({"type": "content_block_delta", "index": 0, "delta": {"type": "signature_delta", "signature": "c2ln"}}),
                json!({"type": "content_block_start", "index": 1, "content_block": {"type": "tool_use", "name": "find", "input": {}}}),
                json!({"type": "content_block_delta", "index": 1, "delta": {"type": "input_json_delta", "partial_json": "{\"q\""}}),
                json!({"type": "content_block_delta", "index": 2, "delta": {"type": "text_delta", "text": "Hi"}}),
                json!({"type": "message_delta", "delta": {"stop_reason": "end_turn"}}),
            ],
        );
        assert_eq!(n, 3 + 4 + 4 + 2);
    }

    #[test]
    fn gemini_counts_text_and_function_calls() {
        let n = counted(
            Protocol::Gemini,
            &[json!({"candidates": [{"content": {"parts": [
                {"text": "Hello", "thought": true},
                {"functionCall": {"name": "find", "args": {"q": 1}}}
            ]}}]})],
        );
        assert_eq!(n, 5 + 4 + r#"{"q":1}"#.len());
    }

    #[test]
    fn four_bytes_make_a_token_rounded_up() {
        let mut r = Relayed::new(Protocol::OpenaiCompletions);
        assert_eq!(r.output_tokens(), 0);
        r.text_bytes = 9;
        assert_eq!(r.output_tokens(), 3);
    }
}
