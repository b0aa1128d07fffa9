//! OpenAI chat streams: `chat.completion.chunk` events, ended by `[DONE]`.

use std::collections::BTreeSet;

use serde_json::{json, Value};

use super::names::{finish_reason_from, finish_reason_name};
use super::usage::{encode_usage, parse_usage};
use crate::bindings::types::SseEvent;
use crate::canonical::{FinishReason, Meta, StreamEvent, Usage};
use crate::errors::in_answer_failure_from;
use crate::json::{as_count, str_member};
use crate::TranslateError;

/// Reads a vendor's chat stream into canonical events (its first choice).
#[derive(Debug, Default)]
pub struct StreamParser {
    started: bool,
    tools: BTreeSet<u32>,
    /// `[DONE]` or a `finish_reason` arrived.
    finished: bool,
}

impl StreamParser {
    pub fn push(&mut self, ev: &SseEvent) -> Result<Vec<StreamEvent>, TranslateError> {
        let data = ev.data.trim();
        if data == "[DONE]" {
            self.finished = true;
            return Ok(Vec::new());
        }
        if data.is_empty() {
            return Ok(Vec::new());
        }
        let chunk = crate::json::parse_stream_chunk(data)?;
        if chunk.get("error").is_some_and(|e| !e.is_null()) && chunk.get("choices").is_none() {
            return Err(TranslateError::Vendor(in_answer_failure_from(&chunk)));
        }
        let mut out = Vec::new();
        if !self.started {
            self.started = true;
            out.push(StreamEvent::Start {
                id: str_member(&chunk, "id").map(str::to_owned),
            });
        }
        let choice = chunk
            .get("choices")
            .and_then(Value::as_array)
            .and_then(|c| c.first());
        if let Some(choice) = choice {
            let delta = choice.get("delta").unwrap_or(&Value::Null);
            let reasoning =
                str_member(delta, "reasoning_content").or_else(|| str_member(delta, "reasoning"));
            if let Some(r) = reasoning.filter(|r| !r.is_empty()) {
                out.push(StreamEvent::Thinking(r.to_owned()));
            }
            if let Some(t) = str_member(delta, "content").filter(|t| !t.is_empty()) {
                out.push(StreamEvent::Text(t.to_owned()));
            }
            if let Some(Value::Array(calls)) = delta.get("tool_calls") {
                for (position, call) in calls.iter().enumerate() {
                    // Some vendors leave out `index`; position is the best guess.
                    let index = call
                        .get("index")
                        .and_then(as_count)
                        .and_then(|i| u32::try_from(i).ok())
                        .unwrap_or(position as u32);
                    let function = call.get("function").unwrap_or(&Value::Null);
                    if self.tools.insert(index) {
                        out.push(StreamEvent::ToolCallStart {
                            index,
                            id: str_member(call, "id").unwrap_or_default().to_owned(),
                            name: str_member(function, "name").unwrap_or_default().to_owned(),
                        });
                    }
                    let args = match function.get("arguments") {
                        Some(Value::String(s)) => s.clone(),
                        None | Some(Value::Null) => String::new(),
                        Some(other) => other.to_string(),
                    };
                    if !args.is_empty() {
                        out.push(StreamEvent::ToolCallArgs {
                            index,
                            fragment: args,
                        });
                    }
                }
            }
            if let Some(reason) = str_member(choice, "finish_reason") {
                self.finished = true;
                out.push(StreamEvent::Finish(finish_reason_from(reason)));
            }
        }
        if let Some(usage) = chunk.get("usage").and_then(parse_usage) {
            out.push(StreamEvent::Usage(usage));
        }
        Ok(out)
    }

    /// Whether the vendor finished its stream.
    pub fn complete(&self) -> bool {
        self.finished
    }
}

/// Writes canonical events as a chat stream for an OpenAI client.
///
/// Every chunk but the last carries `"usage": null` (spec §2.9). A client
/// that asked for `stream_options.include_usage` gets the usage-only chunk
/// (`choices: []`) at the end; any other client gets the usage on the chunk
/// that carries `finish_reason`, which is held back until the usage is known.
#[derive(Debug)]
pub struct StreamEncoder {
    meta: Meta,
    started: bool,
    held: Option<Value>,
    usage: Option<Usage>,
}

fn data(v: Value) -> SseEvent {
    SseEvent {
        event: None,
        data: crate::json::to_text(&v),
    }
}

impl StreamEncoder {
    pub fn new(meta: Meta) -> Self {
        Self {
            meta,
            started: false,
            held: None,
            usage: None,
        }
    }

    fn chunk(&self, choices: Value) -> Value {
        json!({
            "id": self.meta.id("chatcmpl-"),
            "object": "chat.completion.chunk",
            "created": self.meta.created,
            "model": self.meta.model,
            "choices": choices,
            "usage": null,
        })
    }

    fn delta(&self, delta: Value, finish: Option<String>) -> Value {
        self.chunk(json!([{"index": 0, "delta": delta, "logprobs": null, "finish_reason": finish}]))
    }

    pub fn push(&mut self, ev: &StreamEvent) -> Vec<SseEvent> {
        let mut out = Vec::new();
        if !self.started {
            self.started = true;
            out.push(data(
                self.delta(json!({"role": "assistant", "content": ""}), None),
            ));
        }
        let delta = match ev {
            StreamEvent::Start { .. }
            | StreamEvent::Signature(_)
            | StreamEvent::RedactedThinking(_) => None,
            StreamEvent::Text(t) => Some(json!({"content": t})),
            StreamEvent::Thinking(t) => Some(json!({"reasoning_content": t})),
            StreamEvent::ToolCallStart { index, id, name } => Some(json!({"tool_calls": [{
                "index": index, "id": id, "type": "function",
                "function": {"name": name, "arguments": ""}}]})),
            StreamEvent::ToolCallArgs { index, fragment } => Some(json!({"tool_calls": [{
                "index": index, "function": {"arguments": fragment}}]})),
            StreamEvent::Finish(reason) => {
                let chunk = self.delta(json!({}), Some(finish_reason_name(reason)));
                if self.meta.wants_usage {
                    out.push(data(chunk));
                } else {
                    self.held = Some(chunk);
                }
                None
            }
            StreamEvent::Usage(u) => {
                self.usage = Some(*u);
                None
            }
        };
        if let Some(d) = delta {
            out.push(data(self.delta(d, None)));
        }
        out
    }

    /// The closing events: the held finish chunk or the usage chunk, then `[DONE]`.
    pub fn finish(&mut self) -> Vec<SseEvent> {
        let mut out = Vec::new();
        if let Some(mut held) = self.held.take() {
            if let Some(u) = &self.usage {
                held["usage"] = encode_usage(u);
            }
            out.push(data(held));
        } else if !self.started {
            // A stream that said nothing still answers in the protocol's shape.
            out.push(data(self.delta(
                json!({"role": "assistant", "content": ""}),
                Some(finish_reason_name(&FinishReason::Stop)),
            )));
        }
        if self.meta.wants_usage {
            if let Some(u) = &self.usage {
                let mut last = self.chunk(json!([]));
                last["usage"] = encode_usage(u);
                out.push(data(last));
            }
        }
        out.push(SseEvent {
            event: None,
            data: "[DONE]".to_owned(),
        });
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ev(v: Value) -> SseEvent {
        data(v)
    }

    #[test]
    fn parses_deltas_tools_finish_usage() {
        let mut p = StreamParser::default();
        let mut events = Vec::new();
        for chunk in [
            json!({"id": "c", "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}}]}),
            json!({"choices": [{"delta": {"reasoning_content": "hm"}}]}),
            json!({"choices": [{"delta": {"tool_calls": [
                {"index": 0, "id": "a", "function": {"name": "f", "arguments": ""}},
                {"index": 1, "id": "b", "function": {"name": "g", "arguments": "{"}}]}}]}),
            json!({"choices": [{"delta": {"tool_calls": [{"index": 0, "function": {"arguments": "{}"}}]}}]}),
            json!({"choices": [{"delta": {}, "finish_reason": "tool_calls"}]}),
            json!({"choices": [], "usage": {"prompt_tokens": 3, "completion_tokens": 2}}),
        ] {
            events.extend(p.push(&ev(chunk)).unwrap());
        }
        assert!(p.complete());
        assert_eq!(
            events,
            vec![
                StreamEvent::Start {
                    id: Some("c".into())
                },
                StreamEvent::Thinking("hm".into()),
                StreamEvent::ToolCallStart {
                    index: 0,
                    id: "a".into(),
                    name: "f".into()
                },
                StreamEvent::ToolCallStart {
                    index: 1,
                    id: "b".into(),
                    name: "g".into()
                },
                StreamEvent::ToolCallArgs {
                    index: 1,
                    fragment: "{".into()
                },
                StreamEvent::ToolCallArgs {
                    index: 0,
                    fragment: "{}".into()
                },
                StreamEvent::Finish(FinishReason::ToolCalls),
                StreamEvent::Usage(Usage {
                    input_tokens: 3,
                    output_tokens: 2,
                    ..Usage::default()
                }),
            ]
        );
    }

    #[test]
    fn a_stream_without_finish_is_incomplete_and_errors_are_the_vendors() {
        let mut p = StreamParser::default();
        p.push(&ev(json!({"choices": [{"delta": {"content": "x"}}]})))
            .unwrap();
        assert!(!p.complete());
        let err = p
            .push(&ev(
                json!({"error": {"message": "overloaded", "type": "server_error"}}),
            ))
            .unwrap_err();
        assert!(matches!(err, TranslateError::Vendor(ref f) if f.message.contains("overloaded")));
    }

    fn encode(wants_usage: bool) -> Vec<Value> {
        let mut e = StreamEncoder::new(Meta {
            request_id: "r".into(),
            model: "m".into(),
            created: 1,
            wants_usage,
        });
        let mut out = Vec::new();
        for event in [
            StreamEvent::Start { id: None },
            StreamEvent::Text("Hi".into()),
            StreamEvent::Finish(FinishReason::Stop),
            StreamEvent::Usage(Usage {
                input_tokens: 2,
                output_tokens: 1,
                ..Usage::default()
            }),
        ] {
            out.extend(e.push(&event));
        }
        out.extend(e.finish());
        out.into_iter()
            .map(|e| serde_json::from_str(&e.data).unwrap_or(Value::String(e.data)))
            .collect()
    }

    #[test]
    fn usage_rides_on_the_finish_chunk_or_its_own() {
        let plain = encode(false);
        assert_eq!(plain.len(), 4);
        assert_eq!(plain[0]["choices"][0]["delta"]["role"], "assistant");
        assert_eq!(plain[1]["choices"][0]["delta"]["content"], "Hi");
        assert_eq!(plain[2]["choices"][0]["finish_reason"], "stop");
        assert_eq!(plain[2]["usage"]["total_tokens"], 3);
        assert_eq!(plain[3], "[DONE]");
        let with = encode(true);
        assert_eq!(with.len(), 5);
        assert!(with[2]["usage"].is_null());
        assert_eq!(with[3]["choices"], json!([]));
        assert_eq!(with[3]["usage"]["prompt_tokens"], 2);
    }
}
