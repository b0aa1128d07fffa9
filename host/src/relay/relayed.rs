//! What an answer gave its client, in text, so that the gateway can count
//! its tokens when the vendor does not (`billing::tokens`).
//!
//! - A stream cut short — the client disconnects or stops reading (the edge
//!   drops it after `write_timeout`), or the vendor's stream breaks — never
//!   gets to the vendor's usage report: the relay stops reading the vendor
//!   (closing the connection is how a vendor learns to stop generating) and
//!   the bill is what was relayed.
//! - A vendor that never reports usage (several self-hosted OpenAI-compatible
//!   servers, whatever `stream_options.include_usage` says) is billed the
//!   same way, for the whole answer.
//!
//! [`Relayed`] keeps the generated text found in the client-protocol events
//! handed to the connection (content, reasoning, refusals, tool names and
//! arguments); [`answer_text`] finds the same in a plain answer. Only the
//! events' delta fields are read, never the summaries some protocols repeat
//! at the end (`response.output_text.done`, a completed response), so
//! nothing is counted twice.

use crate::billing::tokens::Encoding;
use crate::billing::usage::Usage;
use crate::plugins::bindings::types::{Protocol, SseEvent};
use serde_json::{json, Value};

/// Text held before it is counted: beyond this, the part up to the last
/// line or word break is counted and let go, so a long stream's text is
/// never all in memory (BPE never merges across such a break).
const HELD_TEXT: usize = 256 * 1024;

/// The generated text relayed so far, for one client protocol.
pub struct Relayed {
    protocol: Protocol,
    encoding: Encoding,
    /// Text not counted yet.
    text: String,
    /// Tokens of the text already counted and let go.
    counted: u64,
    /// The latest OpenAI chunk's data, whose repeated members (`id`,
    /// `object`, `created`, `model`, `system_fingerprint`) a usage chunk the
    /// gateway adds must carry. Kept as text, in one buffer, and read only
    /// if that chunk is made (rarely): picking the members out of every
    /// chunk cost more than the rest of the observation.
    last_chunk: String,
}

impl Relayed {
    pub fn new(protocol: Protocol, encoding: Encoding) -> Relayed {
        Relayed {
            protocol,
            encoding,
            text: String::new(),
            counted: 0,
            last_chunk: String::new(),
        }
    }

    /// Keeps the generated text in events handed to the client.
    pub fn observe(&mut self, events: &[SseEvent]) {
        for ev in events {
            // `[DONE]` and other non-JSON payloads carry no text.
            if read_event(self.protocol, &ev.data, &mut self.text) == Some(true) {
                self.remember_chunk(&ev.data);
            }
        }
        if self.text.len() > HELD_TEXT {
            self.count_held();
        }
    }

    /// Keeps `text`, the generated text of `data` already read from it
    /// (an OpenAI chunk the host spliced, `relay::splice`), as `observe`
    /// would have kept it.
    pub fn observe_read(&mut self, data: &str, text: &str) {
        self.text.push_str(text);
        self.remember_chunk(data);
        if self.text.len() > HELD_TEXT {
            self.count_held();
        }
    }

    /// Whether any generated text went out.
    pub fn any(&self) -> bool {
        self.counted > 0 || !self.text.is_empty()
    }

    /// The relayed text's tokens.
    pub fn output_tokens(&self) -> u64 {
        self.counted + self.encoding.count(&self.text)
    }

    fn count_held(&mut self) {
        let cut = self
            .text
            .rfind(['\n', ' '])
            .filter(|&i| i > 0)
            .unwrap_or(self.text.len());
        self.counted += self.encoding.count(&self.text[..cut]);
        self.text.drain(..cut);
    }

    /// Keeps an event that is a JSON object as the latest chunk.
    fn remember_chunk(&mut self, text: &str) {
        if matches!(
            self.protocol,
            Protocol::OpenaiChat | Protocol::OpenaiCompletions
        ) {
            self.last_chunk.clear();
            self.last_chunk.push_str(text);
        }
    }

    /// For an OpenAI chat or completions client that asked for
    /// `stream_options.include_usage` when the vendor sent no usage: the
    /// usage-only chunk the protocol ends with (no choices), carrying the
    /// gateway's count and the stream's own id, model and times.
    pub fn usage_chunk(&self, usage: &Usage) -> Option<SseEvent> {
        let last = serde_json::from_str::<serde_json::Map<String, Value>>(&self.last_chunk).ok()?;
        let mut chunk: serde_json::Map<String, Value> = last
            .into_iter()
            .filter(|(k, _)| {
                ["id", "object", "created", "model", "system_fingerprint"].contains(&k.as_str())
            })
            .collect();
        chunk.insert("choices".into(), json!([]));
        chunk.insert("usage".into(), openai_usage(usage));
        Some(SseEvent {
            event: None,
            data: Value::Object(chunk).to_string(),
        })
    }
}

/// Whether a client event carries generated text (the answer has begun).
pub fn carries_text(protocol: Protocol, ev: &SseEvent) -> bool {
    let mut text = String::new();
    read_event(protocol, &ev.data, &mut text);
    !text.is_empty()
}

/// Appends the generated text of one event to `out` (typed, and as a tree
/// when the typed read does not apply: `typed_text`); returns whether the
/// event is a JSON object, `None` when it is not JSON.
fn read_event(protocol: Protocol, data: &str, out: &mut String) -> Option<bool> {
    if let Some(object) = super::typed_text::read(protocol, data, out) {
        return Some(object);
    }
    let data = serde_json::from_str::<Value>(data).ok()?;
    event_text(protocol, &data, out);
    Some(data.is_object())
}

/// The message of a client event that reports an error instead of an
/// answer: `{"error": {...}}` (OpenAI, Gemini, Anthropic's `error` event),
/// `{"type": "error", "message"}` or a failed response (Responses).
///
/// A stream's first events are all asked, on the way to its first token:
/// a typed pass that only skips over the event settles the usual answer
/// (no `error` member, no error `type`) without building the event as a
/// tree; anything it cannot settle is read as one.
pub fn error_message(ev: &SseEvent) -> Option<String> {
    if let Ok(probe) = serde_json::from_str::<ErrorProbe<'_>>(&ev.data) {
        let error_type = matches!(probe.kind.as_deref(), Some("error" | "response.failed"));
        if probe.error.is_none() && !error_type {
            return None;
        }
    }
    error_message_of_tree(&ev.data)
}

/// [`error_message`] read from the event as a tree.
fn error_message_of_tree(data: &str) -> Option<String> {
    let data: Value = serde_json::from_str(data).ok()?;
    let message = |v: &Value| v["message"].as_str().unwrap_or("no message").to_string();
    if data["error"].is_object() {
        return Some(message(&data["error"]));
    }
    match data["type"].as_str() {
        Some("error") => Some(message(&data)),
        Some("response.failed") => Some(message(&data["response"]["error"])),
        _ => None,
    }
}

/// What [`error_message`] looks at first: whether an object has an `error`
/// member (of any value) and the value of its `type`. An event this cannot
/// read (not an object, a `type` that is not a string, a member written
/// twice) is read as a tree instead, which decides as before.
#[derive(serde::Deserialize)]
struct ErrorProbe<'a> {
    #[serde(default)]
    error: Option<serde::de::IgnoredAny>,
    #[serde(rename = "type", default, borrow)]
    kind: Option<std::borrow::Cow<'a, str>>,
}

/// `usage` as OpenAI's chat and completions protocols show it.
pub fn openai_usage(usage: &Usage) -> Value {
    json!({
        "prompt_tokens": usage.input_tokens,
        "completion_tokens": usage.output_tokens,
        "total_tokens": usage.input_tokens + usage.output_tokens,
        "prompt_tokens_details": {"cached_tokens": usage.cache_read_tokens},
        "completion_tokens_details": {"reasoning_tokens": usage.reasoning_tokens},
    })
}

fn push(out: &mut String, v: &Value) {
    if let Some(s) = v.as_str() {
        out.push_str(s);
    }
}

fn each(v: &Value, mut f: impl FnMut(&Value)) {
    if let Some(items) = v.as_array() {
        items.iter().for_each(&mut f);
    }
}

/// A JSON value written by the vendor as arguments (Gemini's `args`,
/// Anthropic's `input`), as text.
fn push_json(out: &mut String, v: &Value) {
    if !v.is_null() {
        out.push_str(&v.to_string());
    }
}

/// The generated text in one stream event of `protocol`, appended to `out`.
pub(crate) fn event_text(protocol: Protocol, data: &Value, out: &mut String) {
    match protocol {
        Protocol::OpenaiChat => each(&data["choices"], |choice| {
            let d = &choice["delta"];
            push(out, &d["content"]);
            push(out, &d["reasoning_content"]);
            push(out, &d["refusal"]);
            each(&d["tool_calls"], |call| {
                push(out, &call["function"]["name"]);
                push(out, &call["function"]["arguments"]);
            });
        }),
        Protocol::OpenaiCompletions => each(&data["choices"], |choice| push(out, &choice["text"])),
        Protocol::OpenaiResponses => {
            let kind = data["type"].as_str().unwrap_or("");
            if kind.ends_with(".delta") {
                push(out, &data["delta"]);
            } else if kind == "response.output_item.added" {
                push(out, &data["item"]["name"]);
            }
        }
        Protocol::AnthropicMessages => match data["type"].as_str() {
            Some("content_block_delta") => {
                let d = &data["delta"];
                push(out, &d["text"]);
                push(out, &d["thinking"]);
                push(out, &d["partial_json"]);
            }
            Some("content_block_start") => {
                let b = &data["content_block"];
                push(out, &b["text"]);
                push(out, &b["thinking"]);
                push(out, &b["name"]);
            }
            _ => {}
        },
        Protocol::Gemini => each(&data["candidates"], |candidate| {
            gemini_parts(&candidate["content"]["parts"], out)
        }),
        // The other families do not stream text.
        _ => {}
    }
}

fn gemini_parts(parts: &Value, out: &mut String) {
    each(parts, |part| {
        push(out, &part["text"]);
        push(out, &part["functionCall"]["name"]);
        push_json(out, &part["functionCall"]["args"]);
    })
}

/// The generated text of a plain (non-streamed) answer in `protocol`.
pub fn answer_text(protocol: Protocol, body: &Value) -> String {
    let mut out = String::new();
    let o = &mut out;
    match protocol {
        Protocol::OpenaiChat => each(&body["choices"], |choice| {
            let m = &choice["message"];
            match &m["content"] {
                Value::Array(parts) => parts.iter().for_each(|p| push(o, &p["text"])),
                content => push(o, content),
            }
            push(o, &m["reasoning_content"]);
            push(o, &m["refusal"]);
            each(&m["tool_calls"], |call| {
                push(o, &call["function"]["name"]);
                push(o, &call["function"]["arguments"]);
            });
        }),
        Protocol::OpenaiCompletions => each(&body["choices"], |choice| push(o, &choice["text"])),
        Protocol::OpenaiResponses => each(&body["output"], |item| {
            each(&item["content"], |c| push(o, &c["text"]));
            each(&item["summary"], |c| push(o, &c["text"]));
            push(o, &item["name"]);
            push(o, &item["arguments"]);
        }),
        Protocol::AnthropicMessages => each(&body["content"], |block| {
            push(o, &block["text"]);
            push(o, &block["thinking"]);
            push(o, &block["name"]);
            if block["type"] == "tool_use" {
                push_json(o, &block["input"]);
            }
        }),
        Protocol::Gemini => each(&body["candidates"], |candidate| {
            gemini_parts(&candidate["content"]["parts"], o)
        }),
        _ => {}
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn counted(protocol: Protocol, events: &[Value]) -> usize {
        let mut r = Relayed::new(protocol, Encoding::O200kBase);
        let events: Vec<SseEvent> = events
            .iter()
            .map(|v| SseEvent {
                event: None,
                data: v.to_string(),
            })
            .collect();
        r.observe(&events);
        r.text.len()
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
        let mut done = Relayed::new(Protocol::OpenaiChat, Encoding::O200kBase);
        done.observe(&[SseEvent {
            event: None,
            data: "[DONE]".into(),
        }]);
        assert!(!done.any());
    }

    #[test]
    fn an_event_the_typed_read_leaves_is_read_as_a_tree() {
        // A member written twice: the tree keeps the last.
        let mut r = Relayed::new(Protocol::OpenaiChat, Encoding::O200kBase);
        r.observe(&[SseEvent {
            event: None,
            data: r#"{"choices": [{"delta": {"content": "first", "content": "last"}}]}"#.into(),
        }]);
        assert_eq!(r.text, "last");
        assert!(!r.last_chunk.is_empty());
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
    fn the_relayed_text_is_counted_by_the_tokenizer_even_when_let_go() {
        let enc = Encoding::O200kBase;
        let mut r = Relayed::new(Protocol::OpenaiCompletions, enc);
        assert_eq!(r.output_tokens(), 0);
        let piece = "the quick brown fox jumps over the lazy dog. ";
        let event = SseEvent {
            event: None,
            data: json!({"choices": [{"text": piece}]}).to_string(),
        };
        let n = 2 * HELD_TEXT / piece.len();
        for _ in 0..n {
            r.observe(std::slice::from_ref(&event));
        }
        // Some of it was counted and let go, the rest is held.
        assert!(r.counted > 0 && r.text.len() <= HELD_TEXT + piece.len());
        assert_eq!(r.output_tokens(), enc.count(&piece.repeat(n)));
    }

    #[test]
    fn a_usage_chunk_repeats_the_streams_members_and_has_no_choices() {
        let mut r = Relayed::new(Protocol::OpenaiChat, Encoding::O200kBase);
        assert!(r.usage_chunk(&Usage::default()).is_none());
        r.observe(&[SseEvent {
            event: None,
            data: json!({"id": "c1", "object": "chat.completion.chunk", "created": 7, "model": "m",
                         "choices": [{"index": 0, "delta": {"content": "Hi"}}], "usage": null})
            .to_string(),
        }]);
        // The latest chunk's members count; events that are not chunks do not.
        r.observe(&[
            SseEvent {
                event: None,
                data: json!({"id": "c2", "object": "chat.completion.chunk", "created": 8,
                             "model": "m", "choices": [], "x": 1})
                .to_string(),
            },
            SseEvent {
                event: None,
                data: "[DONE]".into(),
            },
        ]);
        let usage = Usage {
            input_tokens: 10,
            output_tokens: 1,
            ..Usage::default()
        };
        let Some(ev) = r.usage_chunk(&usage) else {
            panic!("no usage chunk")
        };
        let v: Value = serde_json::from_str(&ev.data).unwrap_or_default();
        assert_eq!(
            v,
            json!({"id": "c2", "object": "chat.completion.chunk", "created": 8, "model": "m",
                   "choices": [], "usage": {"prompt_tokens": 10, "completion_tokens": 1, "total_tokens": 11,
                   "prompt_tokens_details": {"cached_tokens": 0},
                   "completion_tokens_details": {"reasoning_tokens": 0}}})
        );
    }

    #[test]
    fn error_events_and_the_first_text_are_recognised() {
        let ev = |v: Value| SseEvent {
            event: None,
            data: v.to_string(),
        };
        let openai = ev(json!({"error": {"message": "overloaded", "type": "server_error"}}));
        assert_eq!(error_message(&openai).as_deref(), Some("overloaded"));
        let anthropic =
            ev(json!({"type": "error", "error": {"type": "overloaded_error", "message": "busy"}}));
        assert_eq!(error_message(&anthropic).as_deref(), Some("busy"));
        let responses =
            ev(json!({"type": "response.failed", "response": {"error": {"message": "no"}}}));
        assert_eq!(error_message(&responses).as_deref(), Some("no"));
        let role = ev(json!({"choices": [{"delta": {"role": "assistant", "content": ""}}]}));
        assert_eq!(error_message(&role), None);
        // The typed first pass decides as the tree does, on the odd events
        // too: an `error` that is null or not an object, a `type` escaped,
        // not a string or written twice, an error member written twice,
        // what is not an object.
        for data in [
            r#"{"error":null,"choices":[]}"#,
            r#"{"error":"down"}"#,
            r#"{"error":{"message":"a"},"error":{"message":"b"}}"#,
            r#"{"error":{"message":"a"},"error":null}"#,
            r#"{"\u0074ype":"error","message":"escaped"}"#,
            r#"{"type":"\u0065rror","message":"escaped value"}"#,
            r#"{"type":7,"message":"x"}"#,
            r#"{"type":"ping","type":"error","message":"twice"}"#,
            r#"{"type":"response.failed","response":{}}"#,
            r#"{"type":"message_start","message":{}}"#,
            r#"[{"error":{"message":"x"}}]"#,
            "[DONE]",
            "",
        ] {
            let event = SseEvent {
                event: None,
                data: data.into(),
            };
            assert_eq!(error_message(&event), error_message_of_tree(data), "{data}");
        }
        assert_eq!(
            error_message(&SseEvent {
                event: None,
                data: r#"{"\u0074ype":"error","message":"escaped"}"#.into(),
            })
            .as_deref(),
            Some("escaped")
        );
        assert!(!carries_text(Protocol::OpenaiChat, &role));
        let hi = ev(json!({"choices": [{"delta": {"content": "Hi"}}]}));
        assert!(carries_text(Protocol::OpenaiChat, &hi));
        let start = ev(json!({"type": "message_start", "message": {"content": []}}));
        assert!(!carries_text(Protocol::AnthropicMessages, &start));
    }

    #[test]
    fn plain_answers_give_their_generated_text() {
        let chat = json!({"choices": [{"message": {"content": "Hello", "reasoning_content": "hmm",
            "tool_calls": [{"function": {"name": "find", "arguments": "{}"}}]}}]});
        assert_eq!(answer_text(Protocol::OpenaiChat, &chat), "Hellohmmfind{}");
        let anthropic = json!({"content": [{"type": "text", "text": "Hi"},
            {"type": "tool_use", "name": "find", "input": {"q": 1}}]});
        assert_eq!(
            answer_text(Protocol::AnthropicMessages, &anthropic),
            r#"Hifind{"q":1}"#
        );
        let responses = json!({"output": [{"type": "reasoning", "summary": [{"text": "why"}]},
            {"type": "message", "content": [{"type": "output_text", "text": "Yes"}]}]});
        assert_eq!(answer_text(Protocol::OpenaiResponses, &responses), "whyYes");
        let gemini = json!({"candidates": [{"content": {"parts": [{"text": "Ok"}]}}]});
        assert_eq!(answer_text(Protocol::Gemini, &gemini), "Ok");
        let completions = json!({"choices": [{"text": "once"}]});
        assert_eq!(
            answer_text(Protocol::OpenaiCompletions, &completions),
            "once"
        );
    }
}
