//! Anthropic Messages streams: named events (`message_start`, content
//! blocks, `message_delta`, `message_stop`), every one with an `event:` line
//! and its `type` in the data, as the Anthropic SDKs require.

use std::collections::BTreeMap;

use serde_json::{json, Value};

use super::response::encode_usage;
use super::{finish_reason_from, finish_reason_name, parse_usage};
use crate::bindings::types::SseEvent;
use crate::canonical::{FinishReason, Meta, StreamEvent, Usage};
use crate::errors::in_answer_failure_from;
use crate::json::{count_member, str_member};
use crate::TranslateError;

/// Reads a vendor's Messages stream into canonical events.
#[derive(Debug, Default)]
pub struct StreamParser {
    /// Content block index → tool call ordinal, for `tool_use` blocks.
    tools: BTreeMap<u64, u32>,
    usage: Usage,
    /// `message_stop` arrived.
    stopped: bool,
}

impl StreamParser {
    pub fn push(&mut self, ev: &SseEvent) -> Result<Vec<StreamEvent>, TranslateError> {
        if ev.data.trim().is_empty() {
            return Ok(Vec::new());
        }
        let data: Value = serde_json::from_str(&ev.data).map_err(|e| {
            TranslateError::upstream(format!("stream event is not valid JSON ({e})"))
        })?;
        let kind = str_member(&data, "type")
            .or(ev.event.as_deref())
            .unwrap_or("");
        let mut out = Vec::new();
        match kind {
            "message_start" => {
                let message = data.get("message").unwrap_or(&Value::Null);
                out.push(StreamEvent::Start {
                    id: str_member(message, "id").map(str::to_owned),
                });
                if let Some(u) = message.get("usage").and_then(parse_usage) {
                    self.usage = u;
                    out.push(StreamEvent::Usage(self.usage));
                }
            }
            "content_block_start" => {
                let block = data.get("content_block").unwrap_or(&Value::Null);
                let index = count_member(&data, "index").unwrap_or(0);
                match str_member(block, "type") {
                    Some("text") => {
                        if let Some(t) = str_member(block, "text").filter(|t| !t.is_empty()) {
                            out.push(StreamEvent::Text(t.to_owned()));
                        }
                    }
                    Some("thinking") => {
                        if let Some(t) = str_member(block, "thinking").filter(|t| !t.is_empty()) {
                            out.push(StreamEvent::Thinking(t.to_owned()));
                        }
                    }
                    Some("redacted_thinking") => out.push(StreamEvent::RedactedThinking(
                        str_member(block, "data").unwrap_or_default().to_owned(),
                    )),
                    Some("tool_use") => {
                        let ordinal = self.tools.len() as u32;
                        self.tools.insert(index, ordinal);
                        out.push(StreamEvent::ToolCallStart {
                            index: ordinal,
                            id: str_member(block, "id").unwrap_or_default().to_owned(),
                            name: str_member(block, "name").unwrap_or_default().to_owned(),
                        });
                        // Usually `{}` here with the input in deltas; a whole
                        // input given up front is passed on.
                        if let Some(input) = block
                            .get("input")
                            .filter(|i| i.as_object().is_some_and(|o| !o.is_empty()))
                        {
                            out.push(StreamEvent::ToolCallArgs {
                                index: ordinal,
                                fragment: input.to_string(),
                            });
                        }
                    }
                    _ => {}
                }
            }
            "content_block_delta" => {
                let delta = data.get("delta").unwrap_or(&Value::Null);
                let index = count_member(&data, "index").unwrap_or(0);
                match str_member(delta, "type") {
                    Some("text_delta") => out.push(StreamEvent::Text(
                        str_member(delta, "text").unwrap_or_default().to_owned(),
                    )),
                    Some("thinking_delta") => out.push(StreamEvent::Thinking(
                        str_member(delta, "thinking").unwrap_or_default().to_owned(),
                    )),
                    Some("signature_delta") => out.push(StreamEvent::Signature(
                        str_member(delta, "signature")
                            .unwrap_or_default()
                            .to_owned(),
                    )),
                    Some("input_json_delta") => {
                        let fragment = str_member(delta, "partial_json").unwrap_or_default();
                        if let (Some(ordinal), false) =
                            (self.tools.get(&index), fragment.is_empty())
                        {
                            out.push(StreamEvent::ToolCallArgs {
                                index: *ordinal,
                                fragment: fragment.to_owned(),
                            });
                        }
                    }
                    _ => {}
                }
            }
            "message_delta" => {
                let delta = data.get("delta").unwrap_or(&Value::Null);
                if let Some(reason) = str_member(delta, "stop_reason") {
                    out.push(StreamEvent::Finish(finish_reason_from(
                        reason,
                        str_member(delta, "stop_sequence"),
                    )));
                }
                if let Some(u) = data.get("usage").filter(|u| u.is_object()) {
                    // Cumulative figures; fields left out keep their earlier value.
                    let mut merged = encode_usage(&self.usage);
                    if let (Some(m), Some(new)) = (merged.as_object_mut(), u.as_object()) {
                        for (k, v) in new {
                            if !v.is_null() {
                                m.insert(k.clone(), v.clone());
                            }
                        }
                    }
                    if let Some(u) = parse_usage(&merged) {
                        self.usage = u;
                        out.push(StreamEvent::Usage(u));
                    }
                }
            }
            "message_stop" => self.stopped = true,
            "error" => return Err(TranslateError::Vendor(in_answer_failure_from(&data))),
            // `ping`, `content_block_stop` and events this codec does not know.
            _ => {}
        }
        Ok(out)
    }

    /// Whether the vendor finished its stream (`message_stop`).
    pub fn complete(&self) -> bool {
        self.stopped
    }
}

/// What kind of content block is open in the client's stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Open {
    Text,
    Thinking,
}

/// Writes canonical events as a Messages stream for an Anthropic client.
///
/// Text and thinking stream as they arrive. Tool calls are gathered and each
/// is written as one complete `tool_use` block (start, the whole input as
/// one `input_json_delta`, stop) before whatever follows them: vendors may
/// interleave the arguments of parallel calls, which a Messages stream,
/// whose blocks never overlap, cannot express. The closing `message_delta`
/// carries the stop reason and the final usage.
#[derive(Debug)]
pub struct StreamEncoder {
    meta: Meta,
    started: bool,
    next_index: u64,
    open: Option<(Open, u64)>,
    /// Tool calls not written yet: ordinal → (id, name, arguments).
    tools: BTreeMap<u32, (String, String, String)>,
    finish: Option<FinishReason>,
    usage: Usage,
}

fn event(name: &str, data: Value) -> SseEvent {
    SseEvent {
        event: Some(name.to_owned()),
        data: crate::json::to_text(&data),
    }
}

impl StreamEncoder {
    pub fn new(meta: Meta) -> Self {
        Self {
            meta,
            started: false,
            next_index: 0,
            open: None,
            tools: BTreeMap::new(),
            finish: None,
            usage: Usage::default(),
        }
    }

    fn start(&mut self, out: &mut Vec<SseEvent>) {
        if self.started {
            return;
        }
        self.started = true;
        out.push(event(
            "message_start",
            json!({"type": "message_start", "message": {
                "id": self.meta.id("msg_"), "type": "message", "role": "assistant",
                "model": self.meta.model, "content": [], "stop_reason": null,
                "stop_sequence": null, "usage": encode_usage(&self.usage)}}),
        ));
    }

    fn close(&mut self, out: &mut Vec<SseEvent>) {
        if let Some((_, index)) = self.open.take() {
            out.push(event(
                "content_block_stop",
                json!({"type": "content_block_stop", "index": index}),
            ));
        }
    }

    /// Makes sure a block of `kind` is open; returns its index.
    fn ensure(&mut self, kind: Open, out: &mut Vec<SseEvent>) -> u64 {
        if let Some((k, i)) = self.open {
            if k == kind {
                return i;
            }
        }
        self.close(out);
        let index = self.next_index;
        self.next_index += 1;
        let block = match kind {
            Open::Text => json!({"type": "text", "text": ""}),
            Open::Thinking => json!({"type": "thinking", "thinking": "", "signature": ""}),
        };
        out.push(event(
            "content_block_start",
            json!({"type": "content_block_start", "index": index, "content_block": block}),
        ));
        self.open = Some((kind, index));
        index
    }

    fn delta(index: u64, delta: Value) -> SseEvent {
        event(
            "content_block_delta",
            json!({"type": "content_block_delta", "index": index, "delta": delta}),
        )
    }

    fn flush_tools(&mut self, out: &mut Vec<SseEvent>) {
        if self.tools.is_empty() {
            return;
        }
        self.close(out);
        for (_, (id, name, args)) in std::mem::take(&mut self.tools) {
            let index = self.next_index;
            self.next_index += 1;
            out.push(event(
                "content_block_start",
                json!({"type": "content_block_start", "index": index,
                       "content_block": {"type": "tool_use", "id": id, "name": name, "input": {}}}),
            ));
            if !args.is_empty() {
                out.push(Self::delta(
                    index,
                    json!({"type": "input_json_delta", "partial_json": args}),
                ));
            }
            out.push(event(
                "content_block_stop",
                json!({"type": "content_block_stop", "index": index}),
            ));
        }
    }

    pub fn push(&mut self, ev: &StreamEvent) -> Vec<SseEvent> {
        let mut out = Vec::new();
        if let StreamEvent::Usage(u) = ev {
            self.usage = *u;
        }
        self.start(&mut out);
        match ev {
            StreamEvent::Start { .. } | StreamEvent::Usage(_) => {}
            StreamEvent::ToolCallStart { index, id, name } => {
                self.tools
                    .insert(*index, (id.clone(), name.clone(), String::new()));
            }
            StreamEvent::ToolCallArgs { index, fragment } => {
                if let Some(call) = self.tools.get_mut(index) {
                    call.2.push_str(fragment);
                }
            }
            StreamEvent::Finish(f) => {
                self.finish = Some(f.clone());
            }
            StreamEvent::Text(t) => {
                self.flush_tools(&mut out);
                let i = self.ensure(Open::Text, &mut out);
                out.push(Self::delta(i, json!({"type": "text_delta", "text": t})));
            }
            StreamEvent::Thinking(t) => {
                self.flush_tools(&mut out);
                let i = self.ensure(Open::Thinking, &mut out);
                out.push(Self::delta(
                    i,
                    json!({"type": "thinking_delta", "thinking": t}),
                ));
            }
            StreamEvent::Signature(s) => {
                self.flush_tools(&mut out);
                let i = self.ensure(Open::Thinking, &mut out);
                out.push(Self::delta(
                    i,
                    json!({"type": "signature_delta", "signature": s}),
                ));
            }
            StreamEvent::RedactedThinking(d) => {
                self.flush_tools(&mut out);
                self.close(&mut out);
                let index = self.next_index;
                self.next_index += 1;
                out.push(event(
                    "content_block_start",
                    json!({"type": "content_block_start", "index": index,
                           "content_block": {"type": "redacted_thinking", "data": d}}),
                ));
                out.push(event(
                    "content_block_stop",
                    json!({"type": "content_block_stop", "index": index}),
                ));
            }
        }
        out
    }

    /// Closes the open blocks, then `message_delta` (stop reason, usage) and
    /// `message_stop`.
    pub fn finish(&mut self) -> Vec<SseEvent> {
        let mut out = Vec::new();
        self.start(&mut out);
        self.flush_tools(&mut out);
        self.close(&mut out);
        let (reason, sequence) = match &self.finish {
            Some(f) => {
                let (n, s) = finish_reason_name(f);
                (Some(n), s)
            }
            None => (None, None),
        };
        out.push(event(
            "message_delta",
            json!({"type": "message_delta",
                   "delta": {"stop_reason": reason, "stop_sequence": sequence},
                   "usage": encode_usage(&self.usage)}),
        ));
        out.push(event("message_stop", json!({"type": "message_stop"})));
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn named(name: &str, data: Value) -> SseEvent {
        event(name, data)
    }

    #[test]
    fn parses_a_vendor_stream() {
        let mut p = StreamParser::default();
        let mut got = Vec::new();
        for (name, data) in [
            (
                "message_start",
                json!({"type": "message_start", "message": {"id": "msg_1",
                "usage": {"input_tokens": 5, "output_tokens": 1, "cache_read_input_tokens": 2}}}),
            ),
            ("ping", json!({"type": "ping"})),
            (
                "content_block_start",
                json!({"type": "content_block_start", "index": 0,
                "content_block": {"type": "thinking", "thinking": "", "signature": ""}}),
            ),
            (
                "content_block_delta",
                json!({"type": "content_block_delta", "index": 0,
                "delta": {"type": "thinking_delta", "thinking": "hm"}}),
            ),
            (
                "content_block_delta",
                json!({"type": "content_block_delta", "index": 0,
                "delta": {"type": "signature_delta", "signature": "sig"}}),
            ),
            (
                "content_block_start",
                json!({"type": "content_block_start", "index": 1,
                "content_block": {"type": "tool_use", "id": "toolu_1", "name": "f", "input": {}}}),
            ),
            (
                "content_block_delta",
                json!({"type": "content_block_delta", "index": 1,
                "delta": {"type": "input_json_delta", "partial_json": "{\"a\""}}),
            ),
            (
                "content_block_delta",
                json!({"type": "content_block_delta", "index": 1,
                "delta": {"type": "input_json_delta", "partial_json": ":1}"}}),
            ),
            (
                "message_delta",
                json!({"type": "message_delta",
                "delta": {"stop_reason": "tool_use", "stop_sequence": null},
                "usage": {"output_tokens": 9}}),
            ),
            ("message_stop", json!({"type": "message_stop"})),
        ] {
            got.extend(p.push(&named(name, data)).unwrap());
        }
        assert!(p.complete());
        let usage = Usage {
            input_tokens: 7,
            output_tokens: 9,
            cache_read_tokens: 2,
            ..Usage::default()
        };
        assert_eq!(
            got,
            vec![
                StreamEvent::Start {
                    id: Some("msg_1".into())
                },
                StreamEvent::Usage(Usage {
                    output_tokens: 1,
                    ..usage
                }),
                StreamEvent::Thinking("hm".into()),
                StreamEvent::Signature("sig".into()),
                StreamEvent::ToolCallStart {
                    index: 0,
                    id: "toolu_1".into(),
                    name: "f".into()
                },
                StreamEvent::ToolCallArgs {
                    index: 0,
                    fragment: "{\"a\"".into()
                },
                StreamEvent::ToolCallArgs {
                    index: 0,
                    fragment: ":1}".into()
                },
                StreamEvent::Finish(FinishReason::ToolCalls),
                StreamEvent::Usage(usage),
            ]
        );
    }

    #[test]
    fn error_events_are_vendor_failures() {
        let mut p = StreamParser::default();
        let e = p
            .push(&named("error", json!({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}})))
            .unwrap_err();
        assert!(matches!(e, TranslateError::Vendor(ref f) if f.message.contains("Overloaded")));
    }

    #[test]
    fn encodes_blocks_in_order_with_whole_tool_calls() {
        let mut e = StreamEncoder::new(Meta {
            request_id: "r".into(),
            model: "claude".into(),
            created: 0,
            wants_usage: true,
        });
        let mut out = Vec::new();
        for ev in [
            StreamEvent::Start { id: None },
            StreamEvent::Thinking("a".into()),
            StreamEvent::Signature("s".into()),
            StreamEvent::Text("b".into()),
            StreamEvent::ToolCallStart {
                index: 0,
                id: "c0".into(),
                name: "f".into(),
            },
            StreamEvent::ToolCallStart {
                index: 1,
                id: "c1".into(),
                name: "g".into(),
            },
            StreamEvent::ToolCallArgs {
                index: 1,
                fragment: "{}".into(),
            },
            StreamEvent::ToolCallArgs {
                index: 0,
                fragment: "{\"x\":1}".into(),
            },
            StreamEvent::Finish(FinishReason::ToolCalls),
            StreamEvent::Usage(Usage {
                input_tokens: 4,
                output_tokens: 2,
                ..Usage::default()
            }),
        ] {
            out.extend(e.push(&ev));
        }
        out.extend(e.finish());
        let names: Vec<&str> = out.iter().map(|e| e.event.as_deref().unwrap()).collect();
        assert_eq!(
            names,
            [
                "message_start",
                "content_block_start",
                "content_block_delta",
                "content_block_delta",
                "content_block_stop",
                "content_block_start",
                "content_block_delta",
                "content_block_stop",
                "content_block_start",
                "content_block_delta",
                "content_block_stop",
                "content_block_start",
                "content_block_delta",
                "content_block_stop",
                "message_delta",
                "message_stop"
            ]
        );
        let data: Vec<Value> = out
            .iter()
            .map(|e| serde_json::from_str(&e.data).unwrap())
            .collect();
        for (e, d) in out.iter().zip(&data) {
            assert_eq!(
                d["type"],
                e.event.as_deref().unwrap(),
                "data names its event"
            );
        }
        assert_eq!(data[0]["message"]["content"], json!([]));
        assert_eq!(data[8]["content_block"]["id"], "c0");
        assert_eq!(data[9]["delta"]["partial_json"], "{\"x\":1}");
        assert_eq!(data[11]["index"], 3);
        assert_eq!(data[14]["delta"]["stop_reason"], "tool_use");
        assert_eq!(data[14]["usage"]["input_tokens"], 4);
    }
}
