//! Gemini streams (`:streamGenerateContent?alt=sse`): each event is a whole
//! `GenerateContentResponse` carrying the next parts; the last one has the
//! candidate's `finishReason` and the `usageMetadata`. Data-only events, no
//! `[DONE]` (the google-genai SDK refuses anything else).

use std::collections::BTreeMap;

use serde_json::{json, Value};

use super::parts::encode_parts;
use super::response::{candidate, encode_usage, parse_usage};
use super::{finish_reason_from, key, key_str};
use crate::bindings::types::SseEvent;
use crate::canonical::{Block, FinishReason, Meta, StreamEvent, ToolCall, Usage};
use crate::errors::in_answer_failure_from;
use crate::TranslateError;

/// Reads a vendor's Gemini stream into canonical events.
#[derive(Debug)]
pub struct StreamParser {
    request_id: String,
    started: bool,
    calls: u32,
    finished: bool,
}

impl StreamParser {
    pub fn new(request_id: &str) -> Self {
        Self {
            request_id: request_id.to_owned(),
            started: false,
            calls: 0,
            finished: false,
        }
    }

    pub fn push(&mut self, ev: &SseEvent) -> Result<Vec<StreamEvent>, TranslateError> {
        let data = ev.data.trim();
        if data.is_empty() {
            return Ok(Vec::new());
        }
        let chunk: Value = serde_json::from_str(data).map_err(|e| {
            TranslateError::upstream(format!("stream chunk is not valid JSON ({e})"))
        })?;
        if chunk.get("error").is_some_and(|e| !e.is_null()) {
            return Err(TranslateError::Vendor(in_answer_failure_from(&chunk)));
        }
        let mut out = Vec::new();
        if !self.started {
            self.started = true;
            out.push(StreamEvent::Start {
                id: key_str(&chunk, "responseId").map(str::to_owned),
            });
        }
        let candidate = key(&chunk, "candidates")
            .and_then(Value::as_array)
            .and_then(|c| c.first());
        if let Some(c) = candidate {
            let parts = key(c, "content")
                .and_then(|content| key(content, "parts"))
                .and_then(Value::as_array);
            for part in parts.map(Vec::as_slice).unwrap_or(&[]) {
                let signature = key_str(part, "thoughtSignature");
                let text = key_str(part, "text").unwrap_or_default();
                if key(part, "thought").and_then(Value::as_bool) == Some(true) {
                    if !text.is_empty() {
                        out.push(StreamEvent::Thinking(text.to_owned()));
                    }
                    if let Some(s) = signature {
                        out.push(StreamEvent::Signature(s.to_owned()));
                    }
                    continue;
                }
                if let Some(s) = signature {
                    out.push(StreamEvent::Signature(s.to_owned()));
                }
                if let Some(call) = key(part, "functionCall") {
                    let index = self.calls;
                    self.calls += 1;
                    out.push(StreamEvent::ToolCallStart {
                        index,
                        id: key_str(call, "id")
                            .filter(|id| !id.is_empty())
                            .map(str::to_owned)
                            .unwrap_or_else(|| format!("call_{}_{index}", self.request_id)),
                        name: key_str(call, "name").unwrap_or_default().to_owned(),
                    });
                    out.push(StreamEvent::ToolCallArgs {
                        index,
                        fragment: key(call, "args")
                            .map(Value::to_string)
                            .unwrap_or_else(|| "{}".to_owned()),
                    });
                } else if !text.is_empty() {
                    out.push(StreamEvent::Text(text.to_owned()));
                }
            }
            if let Some(reason) = key_str(c, "finishReason") {
                self.finished = true;
                out.push(StreamEvent::Finish(finish_reason_from(
                    reason,
                    self.calls > 0,
                )));
            }
        }
        if let Some(u) = key(&chunk, "usageMetadata").and_then(parse_usage) {
            out.push(StreamEvent::Usage(u));
        }
        Ok(out)
    }

    /// Whether a chunk with a `finishReason` arrived.
    pub fn complete(&self) -> bool {
        self.finished
    }
}

/// Writes canonical events as a Gemini stream. Function calls are gathered
/// and written whole (Gemini's calls arrive whole, with `args` an object),
/// before whatever follows them; the last chunk carries the finish reason
/// and the usage.
#[derive(Debug)]
pub struct StreamEncoder {
    meta: Meta,
    pending_signature: Option<String>,
    calls: BTreeMap<u32, ToolCall>,
    finish: Option<FinishReason>,
    usage: Option<Usage>,
}

impl StreamEncoder {
    pub fn new(meta: Meta) -> Self {
        Self {
            meta,
            pending_signature: None,
            calls: BTreeMap::new(),
            finish: None,
            usage: None,
        }
    }

    fn chunk(&self, parts: Vec<Value>, last: bool) -> SseEvent {
        let mut c = json!({
            "candidates": [candidate(parts, if last {
                Some(self.finish.as_ref().unwrap_or(&FinishReason::Stop))
            } else {
                None
            })],
            "modelVersion": self.meta.model,
            "responseId": self.meta.request_id,
        });
        if last {
            if let Some(u) = &self.usage {
                c["usageMetadata"] = encode_usage(u);
            }
        }
        SseEvent {
            event: None,
            data: crate::json::to_text(&c),
        }
    }

    /// Parts for these blocks, the waiting signature on the first.
    fn parts(&mut self, blocks: &[Block]) -> Vec<Value> {
        let mut parts = encode_parts(blocks, &|_| None);
        if let (Some(sig), Some(first)) = (&self.pending_signature, parts.first_mut()) {
            first["thoughtSignature"] = json!(sig);
            self.pending_signature = None;
        }
        parts
    }

    fn flush_calls(&mut self) -> Vec<Value> {
        let calls: Vec<Block> = std::mem::take(&mut self.calls)
            .into_values()
            .map(Block::ToolCall)
            .collect();
        if calls.is_empty() {
            return Vec::new();
        }
        self.parts(&calls)
    }

    pub fn push(&mut self, ev: &StreamEvent) -> Vec<SseEvent> {
        let mut out = Vec::new();
        let block = match ev {
            StreamEvent::Start { .. } | StreamEvent::RedactedThinking(_) => None,
            StreamEvent::Usage(u) => {
                self.usage = Some(*u);
                None
            }
            StreamEvent::Finish(f) => {
                self.finish = Some(f.clone());
                None
            }
            StreamEvent::Signature(s) => {
                self.pending_signature = Some(s.clone());
                None
            }
            StreamEvent::ToolCallStart { index, id, name } => {
                self.calls.insert(
                    *index,
                    ToolCall {
                        id: id.clone(),
                        name: name.clone(),
                        arguments: String::new(),
                    },
                );
                None
            }
            StreamEvent::ToolCallArgs { index, fragment } => {
                if let Some(c) = self.calls.get_mut(index) {
                    c.arguments.push_str(fragment);
                }
                None
            }
            StreamEvent::Text(t) => Some(Block::Text(t.clone())),
            StreamEvent::Thinking(t) => Some(Block::Thinking {
                text: t.clone(),
                signature: None,
            }),
        };
        if let Some(block) = block {
            let calls = self.flush_calls();
            if !calls.is_empty() {
                out.push(self.chunk(calls, false));
            }
            // A thought's own part does not take the waiting signature.
            let parts = if matches!(block, Block::Thinking { .. }) {
                encode_parts(std::slice::from_ref(&block), &|_| None)
            } else {
                self.parts(std::slice::from_ref(&block))
            };
            out.push(self.chunk(parts, false));
        }
        out
    }

    /// The last chunk: calls not yet written, a signature not yet placed,
    /// the finish reason and the usage.
    pub fn finish(&mut self) -> Vec<SseEvent> {
        let mut parts = self.flush_calls();
        if let Some(sig) = self.pending_signature.take() {
            parts.push(json!({"text": "", "thought": true, "thoughtSignature": sig}));
        }
        vec![self.chunk(parts, true)]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn data(v: Value) -> SseEvent {
        SseEvent {
            event: None,
            data: crate::json::to_text(&v),
        }
    }

    #[test]
    fn parses_whole_calls_and_the_last_chunk() {
        let mut p = StreamParser::new("req_1");
        let mut got = Vec::new();
        for c in [
            json!({"candidates": [{"content": {"role": "model", "parts": [{"text": "hm", "thought": true}]}}], "responseId": "x"}),
            json!({"candidates": [{"content": {"role": "model", "parts": [
                {"functionCall": {"name": "f", "args": {"q": "a"}}, "thoughtSignature": "U0k="}]}}]}),
            json!({"candidates": [{"content": {"role": "model", "parts": [{"text": ""}]}, "finishReason": "STOP"}],
                   "usageMetadata": {"promptTokenCount": 4, "candidatesTokenCount": 2, "thoughtsTokenCount": 1}}),
        ] {
            got.extend(p.push(&data(c)).unwrap());
        }
        assert!(p.complete());
        assert_eq!(
            got,
            vec![
                StreamEvent::Start {
                    id: Some("x".into())
                },
                StreamEvent::Thinking("hm".into()),
                StreamEvent::Signature("U0k=".into()),
                StreamEvent::ToolCallStart {
                    index: 0,
                    id: "call_req_1_0".into(),
                    name: "f".into()
                },
                StreamEvent::ToolCallArgs {
                    index: 0,
                    fragment: "{\"q\":\"a\"}".into()
                },
                StreamEvent::Finish(FinishReason::ToolCalls),
                StreamEvent::Usage(Usage {
                    input_tokens: 4,
                    output_tokens: 3,
                    reasoning_tokens: 1,
                    ..Usage::default()
                }),
            ]
        );
    }

    #[test]
    fn encodes_calls_whole_and_usage_last() {
        let mut e = StreamEncoder::new(Meta {
            request_id: "r".into(),
            model: "gemini".into(),
            created: 0,
            wants_usage: true,
        });
        let mut out = Vec::new();
        for ev in [
            StreamEvent::Thinking("a".into()),
            StreamEvent::Signature("c2ln".into()),
            StreamEvent::ToolCallStart {
                index: 0,
                id: "c".into(),
                name: "f".into(),
            },
            StreamEvent::ToolCallArgs {
                index: 0,
                fragment: "{\"x\"".into(),
            },
            StreamEvent::ToolCallArgs {
                index: 0,
                fragment: ":1}".into(),
            },
            StreamEvent::Finish(FinishReason::ToolCalls),
            StreamEvent::Usage(Usage {
                input_tokens: 2,
                output_tokens: 1,
                ..Usage::default()
            }),
        ] {
            out.extend(e.push(&ev));
        }
        out.extend(e.finish());
        let v: Vec<Value> = out
            .iter()
            .map(|e| serde_json::from_str(&e.data).unwrap())
            .collect();
        assert!(out.iter().all(|e| e.event.is_none()));
        assert_eq!(v.len(), 2);
        assert_eq!(
            v[0]["candidates"][0]["content"]["parts"][0],
            json!({"text": "a", "thought": true})
        );
        assert_eq!(
            v[1]["candidates"][0]["content"]["parts"][0],
            json!({"functionCall": {"name": "f", "args": {"x": 1}}, "thoughtSignature": "c2ln"})
        );
        assert_eq!(v[1]["candidates"][0]["finishReason"], "STOP");
        assert_eq!(v[1]["usageMetadata"]["promptTokenCount"], 2);
    }
}
