//! Responses streams: typed events (`response.created`, items added, deltas,
//! items done, `response.completed`), each with `type` and
//! `sequence_number` in its data and its type as the `event:` name.

use std::collections::BTreeMap;

use serde_json::{json, Value};

use super::response::{
    call_item, finish_of, item_blocks, item_id, message_item, parse_usage, reasoning_item,
    response_object, status_of,
};
use super::REDACTED_PREFIX;
use crate::bindings::types::SseEvent;
use crate::canonical::{Block, FinishReason, Meta, StreamEvent, ToolCall, Usage};
use crate::errors::in_answer_failure_from;
use crate::json::{count_member, str_member};
use crate::TranslateError;

/// Reads a vendor's Responses stream into canonical events.
#[derive(Debug, Default)]
pub struct StreamParser {
    /// Output index → tool call ordinal.
    calls: BTreeMap<u64, u32>,
    finished: bool,
}

impl StreamParser {
    pub fn push(&mut self, ev: &SseEvent) -> Result<Vec<StreamEvent>, TranslateError> {
        if ev.data.trim().is_empty() || ev.data.trim() == "[DONE]" {
            return Ok(Vec::new());
        }
        let data: Value = serde_json::from_str(&ev.data).map_err(|e| {
            TranslateError::upstream(format!("stream event is not valid JSON ({e})"))
        })?;
        if data.get("error").is_some_and(|e| e.is_object()) && str_member(&data, "type").is_none() {
            return Err(TranslateError::Vendor(in_answer_failure_from(&data)));
        }
        let index = count_member(&data, "output_index").unwrap_or(0);
        let mut out = Vec::new();
        match str_member(&data, "type").unwrap_or("") {
            "response.created" => out.push(StreamEvent::Start {
                id: data
                    .get("response")
                    .and_then(|r| str_member(r, "id"))
                    .map(str::to_owned),
            }),
            "response.output_item.added" => {
                let item = data.get("item").unwrap_or(&Value::Null);
                if str_member(item, "type") == Some("function_call") {
                    let ordinal = self.calls.len() as u32;
                    self.calls.insert(index, ordinal);
                    out.push(StreamEvent::ToolCallStart {
                        index: ordinal,
                        id: str_member(item, "call_id").unwrap_or_default().to_owned(),
                        name: str_member(item, "name").unwrap_or_default().to_owned(),
                    });
                }
            }
            "response.output_text.delta" | "response.refusal.delta" => out.push(StreamEvent::Text(
                str_member(&data, "delta").unwrap_or_default().to_owned(),
            )),
            "response.reasoning_summary_text.delta" | "response.reasoning_text.delta" => out.push(
                StreamEvent::Thinking(str_member(&data, "delta").unwrap_or_default().to_owned()),
            ),
            "response.function_call_arguments.delta" => {
                if let Some(ordinal) = self.calls.get(&index) {
                    out.push(StreamEvent::ToolCallArgs {
                        index: *ordinal,
                        fragment: str_member(&data, "delta").unwrap_or_default().to_owned(),
                    });
                }
            }
            "response.output_item.done" => {
                let item = data.get("item").unwrap_or(&Value::Null);
                if str_member(item, "type") == Some("reasoning") {
                    if let Some(e) = str_member(item, "encrypted_content") {
                        out.push(match e.strip_prefix(REDACTED_PREFIX) {
                            Some(d) => StreamEvent::RedactedThinking(d.to_owned()),
                            None => StreamEvent::Signature(e.to_owned()),
                        });
                    }
                }
            }
            "response.completed" | "response.incomplete" => {
                self.finished = true;
                let r = data.get("response").unwrap_or(&Value::Null);
                let has_calls = !self.calls.is_empty()
                    || r.get("output").and_then(Value::as_array).is_some_and(|o| {
                        o.iter()
                            .flat_map(item_blocks)
                            .any(|b| matches!(b, Block::ToolCall(_)))
                    });
                if let Some(f) = finish_of(
                    str_member(r, "status"),
                    r.get("incomplete_details")
                        .and_then(|d| str_member(d, "reason")),
                    has_calls,
                ) {
                    out.push(StreamEvent::Finish(f));
                }
                if let Some(u) = r.get("usage").and_then(parse_usage) {
                    out.push(StreamEvent::Usage(u));
                }
            }
            "response.failed" => {
                let error = data
                    .get("response")
                    .and_then(|r| r.get("error"))
                    .cloned()
                    .unwrap_or(Value::Null);
                return Err(TranslateError::Vendor(in_answer_failure_from(
                    &json!({ "error": error }),
                )));
            }
            "error" => {
                return Err(TranslateError::Vendor(in_answer_failure_from(&json!({
                    "error": {"message": str_member(&data, "message").unwrap_or_default(),
                              "type": str_member(&data, "code")}
                }))))
            }
            _ => {}
        }
        Ok(out)
    }

    /// Whether `response.completed` (or `.incomplete`) arrived.
    pub fn complete(&self) -> bool {
        self.finished
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Message,
    Reasoning,
    Call,
}

#[derive(Debug)]
struct Item {
    kind: Kind,
    id: String,
    text: String,
    signature: Option<String>,
    /// For reasoning: a summary part was opened.
    summary_open: bool,
    call: Option<ToolCall>,
    done: bool,
    /// The finished item, as `response.completed` repeats it.
    value: Value,
}

/// Writes canonical events as a Responses stream for an OpenAI client.
///
/// Text and thinking go into one open message or reasoning item at a time;
/// a function call item stays open until something other than tool calls
/// comes (vendors may interleave the arguments of parallel calls, which this
/// protocol, addressed by output index, can carry).
#[derive(Debug)]
pub struct StreamEncoder {
    meta: Meta,
    seq: u64,
    started: bool,
    items: Vec<Item>,
    open_message: Option<usize>,
    open_reasoning: Option<usize>,
    /// Tool call index → item index.
    calls: BTreeMap<u32, usize>,
    finish: Option<FinishReason>,
    usage: Option<Usage>,
}

impl StreamEncoder {
    pub fn new(meta: Meta) -> Self {
        Self {
            meta,
            seq: 0,
            started: false,
            items: Vec::new(),
            open_message: None,
            open_reasoning: None,
            calls: BTreeMap::new(),
            finish: None,
            usage: None,
        }
    }

    fn emit(&mut self, out: &mut Vec<SseEvent>, kind: &str, mut data: Value) {
        data["type"] = json!(kind);
        data["sequence_number"] = json!(self.seq);
        self.seq += 1;
        out.push(SseEvent {
            event: Some(kind.to_owned()),
            data: crate::json::to_text(&data),
        });
    }

    fn start(&mut self, out: &mut Vec<SseEvent>) {
        if self.started {
            return;
        }
        self.started = true;
        let r = response_object(
            &self.meta,
            self.meta.created,
            "in_progress",
            Vec::new(),
            None,
            None,
        );
        self.emit(out, "response.created", json!({ "response": r }));
        let r = response_object(
            &self.meta,
            self.meta.created,
            "in_progress",
            Vec::new(),
            None,
            None,
        );
        self.emit(out, "response.in_progress", json!({ "response": r }));
    }

    fn add(&mut self, out: &mut Vec<SseEvent>, kind: Kind, call: Option<ToolCall>) -> usize {
        let index = self.items.len();
        let prefix = match kind {
            Kind::Message => "msg",
            Kind::Reasoning => "rs",
            Kind::Call => "fc",
        };
        let id = item_id(prefix, &self.meta, index);
        let item_json = match kind {
            Kind::Message => json!({"id": id, "type": "message", "status": "in_progress",
                                    "role": "assistant", "content": []}),
            Kind::Reasoning => json!({"id": id, "type": "reasoning", "summary": []}),
            Kind::Call => {
                let c = call.clone().unwrap_or_default();
                json!({"id": id, "type": "function_call", "status": "in_progress",
                       "call_id": c.id, "name": c.name, "arguments": ""})
            }
        };
        self.emit(
            out,
            "response.output_item.added",
            json!({"output_index": index, "item": item_json}),
        );
        if kind == Kind::Message {
            self.emit(
                out,
                "response.content_part.added",
                json!({"item_id": id, "output_index": index, "content_index": 0,
                       "part": {"type": "output_text", "text": "", "annotations": []}}),
            );
        }
        self.items.push(Item {
            kind,
            id,
            text: String::new(),
            signature: None,
            summary_open: false,
            call,
            done: false,
            value: Value::Null,
        });
        index
    }

    fn close(&mut self, out: &mut Vec<SseEvent>, index: usize) {
        let (kind, id, text, signature, summary_open, call, done) = {
            let it = &self.items[index];
            (
                it.kind,
                it.id.clone(),
                it.text.clone(),
                it.signature.clone(),
                it.summary_open,
                it.call.clone(),
                it.done,
            )
        };
        if done {
            return;
        }
        let value = match kind {
            Kind::Message => {
                self.emit(
                    out,
                    "response.output_text.done",
                    json!({"item_id": id, "output_index": index,
                    "content_index": 0, "text": text, "logprobs": []}),
                );
                self.emit(out, "response.content_part.done", json!({"item_id": id, "output_index": index,
                    "content_index": 0, "part": {"type": "output_text", "text": text, "annotations": []}}));
                message_item(&id, &text, "completed")
            }
            Kind::Reasoning => {
                if summary_open {
                    self.emit(
                        out,
                        "response.reasoning_summary_text.done",
                        json!({"item_id": id,
                        "output_index": index, "summary_index": 0, "text": text}),
                    );
                    self.emit(
                        out,
                        "response.reasoning_summary_part.done",
                        json!({"item_id": id,
                        "output_index": index, "summary_index": 0,
                        "part": {"type": "summary_text", "text": text}}),
                    );
                }
                reasoning_item(&id, &text, signature.as_deref())
            }
            Kind::Call => {
                let mut c = call.unwrap_or_default();
                c.arguments = text.clone();
                self.emit(
                    out,
                    "response.function_call_arguments.done",
                    json!({"item_id": id,
                    "output_index": index, "arguments": text}),
                );
                call_item(&id, &c, "completed")
            }
        };
        self.emit(
            out,
            "response.output_item.done",
            json!({"output_index": index, "item": value}),
        );
        let it = &mut self.items[index];
        it.done = true;
        it.value = value;
        match kind {
            Kind::Message => self.open_message = None,
            Kind::Reasoning => self.open_reasoning = None,
            Kind::Call => {}
        }
    }

    fn close_calls(&mut self, out: &mut Vec<SseEvent>) {
        let open: Vec<usize> = self
            .calls
            .values()
            .copied()
            .filter(|i| !self.items[*i].done)
            .collect();
        for i in open {
            self.close(out, i);
        }
    }

    fn close_all(&mut self, out: &mut Vec<SseEvent>) {
        for i in 0..self.items.len() {
            self.close(out, i);
        }
    }

    pub fn push(&mut self, ev: &StreamEvent) -> Vec<SseEvent> {
        let mut out = Vec::new();
        self.start(&mut out);
        match ev {
            StreamEvent::Start { .. } => {}
            StreamEvent::Usage(u) => self.usage = Some(*u),
            StreamEvent::Finish(f) => self.finish = Some(f.clone()),
            StreamEvent::Text(t) => {
                if let Some(r) = self.open_reasoning {
                    self.close(&mut out, r);
                }
                self.close_calls(&mut out);
                let i = match self.open_message {
                    Some(i) => i,
                    None => {
                        let i = self.add(&mut out, Kind::Message, None);
                        self.open_message = Some(i);
                        i
                    }
                };
                self.items[i].text.push_str(t);
                let id = self.items[i].id.clone();
                self.emit(
                    &mut out,
                    "response.output_text.delta",
                    json!({"item_id": id, "output_index": i,
                    "content_index": 0, "delta": t, "logprobs": []}),
                );
            }
            StreamEvent::Thinking(t) => {
                if let Some(m) = self.open_message {
                    self.close(&mut out, m);
                }
                self.close_calls(&mut out);
                let i = self.reasoning(&mut out);
                let id = self.items[i].id.clone();
                if !self.items[i].summary_open {
                    self.items[i].summary_open = true;
                    self.emit(&mut out, "response.reasoning_summary_part.added", json!({"item_id": id,
                        "output_index": i, "summary_index": 0, "part": {"type": "summary_text", "text": ""}}));
                }
                self.items[i].text.push_str(t);
                self.emit(
                    &mut out,
                    "response.reasoning_summary_text.delta",
                    json!({"item_id": id,
                    "output_index": i, "summary_index": 0, "delta": t}),
                );
            }
            StreamEvent::Signature(s) => {
                if let Some(m) = self.open_message {
                    self.close(&mut out, m);
                }
                self.close_calls(&mut out);
                let i = self.reasoning(&mut out);
                self.items[i].signature = Some(s.clone());
            }
            StreamEvent::RedactedThinking(d) => {
                self.close_all(&mut out);
                let i = self.add(&mut out, Kind::Reasoning, None);
                self.items[i].signature = Some(format!("{REDACTED_PREFIX}{d}"));
                self.close(&mut out, i);
            }
            StreamEvent::ToolCallStart { index, id, name } => {
                for open in [self.open_message, self.open_reasoning]
                    .into_iter()
                    .flatten()
                {
                    self.close(&mut out, open);
                }
                let call = ToolCall {
                    id: id.clone(),
                    name: name.clone(),
                    arguments: String::new(),
                };
                let i = self.add(&mut out, Kind::Call, Some(call));
                self.calls.insert(*index, i);
            }
            StreamEvent::ToolCallArgs { index, fragment } => {
                if let Some(&i) = self.calls.get(index) {
                    self.items[i].text.push_str(fragment);
                    if !self.items[i].done {
                        let id = self.items[i].id.clone();
                        self.emit(
                            &mut out,
                            "response.function_call_arguments.delta",
                            json!({"item_id": id, "output_index": i, "delta": fragment}),
                        );
                    }
                }
            }
        }
        out
    }

    /// The open reasoning item, opened if needed.
    fn reasoning(&mut self, out: &mut Vec<SseEvent>) -> usize {
        match self.open_reasoning {
            Some(i) => i,
            None => {
                let i = self.add(out, Kind::Reasoning, None);
                self.open_reasoning = Some(i);
                i
            }
        }
    }

    /// Closes every item, then `response.completed` (or `.incomplete`)
    /// with every item and the usage.
    pub fn finish(&mut self) -> Vec<SseEvent> {
        let mut out = Vec::new();
        self.start(&mut out);
        self.close_all(&mut out);
        let status = status_of(self.finish.as_ref());
        let output: Vec<Value> = self.items.iter().map(|i| i.value.clone()).collect();
        let r = response_object(
            &self.meta,
            self.meta.created,
            status,
            output,
            self.finish.as_ref(),
            self.usage.as_ref(),
        );
        let kind = if status == "completed" {
            "response.completed"
        } else {
            "response.incomplete"
        };
        self.emit(&mut out, kind, json!({ "response": r }));
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(events: &[StreamEvent]) -> Vec<(String, Value)> {
        let mut e = StreamEncoder::new(Meta {
            request_id: "r".into(),
            model: "m".into(),
            created: 1,
            wants_usage: true,
        });
        let mut out = Vec::new();
        for ev in events {
            out.extend(e.push(ev));
        }
        out.extend(e.finish());
        out.into_iter()
            .map(|e| (e.event.unwrap(), serde_json::from_str(&e.data).unwrap()))
            .collect()
    }

    #[test]
    fn the_sequence_the_sdk_checks() {
        let evs = run(&[
            StreamEvent::Start { id: None },
            StreamEvent::Thinking("hm".into()),
            StreamEvent::Signature("sig".into()),
            StreamEvent::Text("Hel".into()),
            StreamEvent::Text("lo".into()),
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
                fragment: "{\"a\":1}".into(),
            },
            StreamEvent::Finish(FinishReason::ToolCalls),
            StreamEvent::Usage(Usage {
                input_tokens: 3,
                output_tokens: 4,
                ..Usage::default()
            }),
        ]);
        let names: Vec<&str> = evs.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names[0], "response.created");
        assert_eq!(names[1], "response.in_progress");
        assert_eq!(*names.last().unwrap(), "response.completed");
        for (i, (name, data)) in evs.iter().enumerate() {
            assert_eq!(data["type"], name.as_str());
            assert_eq!(data["sequence_number"], i as u64);
        }
        // Every item added before its deltas and done before the end, ids stable.
        let added: Vec<&Value> = evs
            .iter()
            .filter(|(n, _)| n == "response.output_item.added")
            .map(|(_, d)| d)
            .collect();
        let done: Vec<&Value> = evs
            .iter()
            .filter(|(n, _)| n == "response.output_item.done")
            .map(|(_, d)| d)
            .collect();
        assert_eq!(added.len(), 4);
        assert_eq!(done.len(), 4);
        for (a, d) in added.iter().zip(&done) {
            assert_eq!(a["item"]["id"], d["item"]["id"]);
        }
        let completed = &evs.last().unwrap().1["response"];
        assert_eq!(completed["output"].as_array().unwrap().len(), 4);
        assert_eq!(completed["output"][0]["encrypted_content"], "sig");
        assert_eq!(completed["output"][1]["content"][0]["text"], "Hello");
        assert_eq!(completed["output"][2]["arguments"], "{\"a\":1}");
        assert_eq!(completed["output"][3]["arguments"], "{}");
        assert_eq!(completed["usage"]["total_tokens"], 7);
        // Message items carry content: [] when added, parts added before text.
        let msg_added = added
            .iter()
            .find(|a| a["item"]["type"] == "message")
            .unwrap();
        assert_eq!(msg_added["item"]["content"], json!([]));
        let part_at = names
            .iter()
            .position(|n| *n == "response.content_part.added")
            .unwrap();
        let delta_at = names
            .iter()
            .position(|n| *n == "response.output_text.delta")
            .unwrap();
        assert!(part_at < delta_at);
    }

    #[test]
    fn parser_reads_what_the_encoder_writes() {
        let evs = [
            StreamEvent::Start { id: None },
            StreamEvent::Thinking("hm".into()),
            StreamEvent::Signature("sig".into()),
            StreamEvent::Text("x".into()),
            StreamEvent::ToolCallStart {
                index: 0,
                id: "c0".into(),
                name: "f".into(),
            },
            StreamEvent::ToolCallArgs {
                index: 0,
                fragment: "{}".into(),
            },
            StreamEvent::Finish(FinishReason::ToolCalls),
            StreamEvent::Usage(Usage {
                input_tokens: 3,
                output_tokens: 4,
                ..Usage::default()
            }),
        ];
        let mut e = StreamEncoder::new(Meta {
            request_id: "r".into(),
            model: "m".into(),
            created: 1,
            wants_usage: true,
        });
        let mut wire = Vec::new();
        for ev in &evs {
            wire.extend(e.push(ev));
        }
        wire.extend(e.finish());
        let mut p = StreamParser::default();
        let mut back = Vec::new();
        for w in &wire {
            back.extend(p.push(w).unwrap());
        }
        assert!(p.complete());
        assert_eq!(
            back[0],
            StreamEvent::Start {
                id: Some("resp_r".into())
            }
        );
        assert_eq!(back[1..], evs[1..]);
    }
}
