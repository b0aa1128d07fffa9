//! The legacy OpenAI completions codec (`POST /v1/completions`), both ways.
//!
//! A prompt becomes one user turn; the answer's text parts become `text`.
//! What chat models cannot do for a completion client is refused rather than
//! faked: several prompts at once, `echo`, `suffix`, `best_of`, `logprobs`,
//! `n` > 1. The protocol's own default output cap (16 tokens) applies when
//! the client gives none, as it does at OpenAI.

use serde_json::{json, Map, Value};

use crate::bindings::types::SseEvent;
use crate::canonical::{
    joined_text, Block, FinishReason, Message, Meta, Request, Response, Role, Sampling,
    StreamEvent, Usage,
};
use crate::json::{count_member, str_member, Fields};
use crate::openai_chat::{encode_usage, finish_reason_from, finish_reason_name, parse_usage};
use crate::TranslateError;

/// The protocol's default `max_tokens`.
pub const DEFAULT_MAX_TOKENS: u64 = 16;

/// Reads a completions request body.
pub fn parse_request(body: &Value) -> Result<Request, TranslateError> {
    let f = Fields::of(body)?;
    let prompt =
        match f.present("prompt") {
            Some(Value::String(s)) => s.clone(),
            Some(Value::Array(items)) if items.len() == 1 && items[0].is_string() => {
                items[0].as_str().unwrap_or_default().to_owned()
            }
            Some(Value::Array(_)) => return Err(TranslateError::unsupported(
                "several prompts, or prompts as token ids, are only served by a completions vendor",
            )),
            _ => return Err(TranslateError::invalid("`prompt` must be a string")),
        };
    for key in ["suffix", "best_of", "logprobs"] {
        if f.present(key).is_some() {
            return Err(TranslateError::unsupported(format!(
                "`{key}` is only served by a completions vendor"
            )));
        }
    }
    if f.boolean("echo")? == Some(true) || f.count("n")?.is_some_and(|n| n > 1) {
        return Err(TranslateError::unsupported(
            "`echo` and `n` > 1 are only served by a completions vendor",
        ));
    }
    let mut req = Request::new(
        f.string("model")?.unwrap_or_default(),
        vec![Message::text(Role::User, prompt)],
    );
    req.sampling = Sampling {
        temperature: f.number("temperature")?,
        top_p: f.number("top_p")?,
        top_k: None,
        presence_penalty: f.number("presence_penalty")?,
        frequency_penalty: f.number("frequency_penalty")?,
        seed: f.integer("seed")?,
        stop: f.strings("stop")?,
    };
    req.max_tokens = Some(f.count("max_tokens")?.unwrap_or(DEFAULT_MAX_TOKENS));
    req.stream = f.boolean("stream")?.unwrap_or(false);
    req.stream_usage = f
        .present("stream_options")
        .and_then(|o| o.get("include_usage"))
        .and_then(Value::as_bool)
        .unwrap_or(false);
    req.user = f.string("user")?;
    Ok(req)
}

/// Writes a completions request body: the conversation's text, turns
/// separated by blank lines, is the prompt.
pub fn encode_request(req: &Request) -> Value {
    let prompt: Vec<String> = req
        .messages
        .iter()
        .map(|m| joined_text(&m.content))
        .filter(|t| !t.is_empty())
        .collect();
    let mut out = Map::new();
    out.insert("model".into(), json!(req.model));
    out.insert("prompt".into(), json!(prompt.join("\n\n")));
    if let Some(m) = req.max_tokens {
        out.insert("max_tokens".into(), json!(m));
    }
    let s = &req.sampling;
    for (k, v) in [
        ("temperature", s.temperature),
        ("top_p", s.top_p),
        ("presence_penalty", s.presence_penalty),
        ("frequency_penalty", s.frequency_penalty),
    ] {
        if let Some(v) = v {
            out.insert(k.into(), json!(v));
        }
    }
    if let Some(seed) = s.seed {
        out.insert("seed".into(), json!(seed));
    }
    if !s.stop.is_empty() {
        out.insert("stop".into(), json!(s.stop));
    }
    if req.stream {
        out.insert("stream".into(), json!(true));
        out.insert("stream_options".into(), json!({"include_usage": true}));
    }
    if let Some(u) = &req.user {
        out.insert("user".into(), json!(u));
    }
    Value::Object(out)
}

/// Reads a `text_completion` body (its first choice).
pub fn parse_response(body: &Value) -> Result<Response, TranslateError> {
    let choice = body
        .get("choices")
        .and_then(Value::as_array)
        .ok_or_else(|| TranslateError::upstream("completion has no `choices` array"))?
        .first();
    let text = choice
        .and_then(|c| str_member(c, "text"))
        .unwrap_or_default();
    Ok(Response {
        id: str_member(body, "id").map(str::to_owned),
        model: str_member(body, "model").map(str::to_owned),
        created: count_member(body, "created"),
        content: if text.is_empty() {
            Vec::new()
        } else {
            vec![Block::Text(text.to_owned())]
        },
        finish: choice
            .and_then(|c| str_member(c, "finish_reason"))
            .map(finish_reason_from),
        usage: body.get("usage").and_then(parse_usage),
    })
}

fn completion(meta: &Meta, created: u64, text: &str, finish: Option<&FinishReason>) -> Value {
    json!({
        "id": meta.id("cmpl-"),
        "object": "text_completion",
        "created": created,
        "model": meta.model,
        "choices": [{"text": text, "index": 0, "logprobs": null,
                     "finish_reason": finish.map(finish_reason_name)}],
    })
}

/// Writes a `text_completion` body: the answer's text (thinking and tool
/// calls have no place in this protocol).
pub fn encode_response(r: &Response, meta: &Meta) -> Value {
    let mut out = completion(
        meta,
        r.created.unwrap_or(meta.created),
        &joined_text(&r.content),
        r.finish.as_ref(),
    );
    if let Some(u) = &r.usage {
        out["usage"] = encode_usage(u);
    }
    out
}

/// Reads a vendor's completions stream.
#[derive(Debug, Default)]
pub struct StreamParser {
    started: bool,
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
        let chunk: Value = serde_json::from_str(data).map_err(|e| {
            TranslateError::upstream(format!("stream chunk is not valid JSON ({e})"))
        })?;
        if chunk.get("error").is_some_and(|e| !e.is_null()) {
            return Err(TranslateError::Vendor(
                crate::errors::in_answer_failure_from(&chunk),
            ));
        }
        let mut out = Vec::new();
        if !self.started {
            self.started = true;
            out.push(StreamEvent::Start {
                id: str_member(&chunk, "id").map(str::to_owned),
            });
        }
        if let Some(c) = chunk
            .get("choices")
            .and_then(Value::as_array)
            .and_then(|c| c.first())
        {
            if let Some(t) = str_member(c, "text").filter(|t| !t.is_empty()) {
                out.push(StreamEvent::Text(t.to_owned()));
            }
            if let Some(f) = str_member(c, "finish_reason") {
                self.finished = true;
                out.push(StreamEvent::Finish(finish_reason_from(f)));
            }
        }
        if let Some(u) = chunk.get("usage").and_then(parse_usage) {
            out.push(StreamEvent::Usage(u));
        }
        Ok(out)
    }

    pub fn complete(&self) -> bool {
        self.finished
    }
}

/// Writes canonical events as a completions stream: one chunk per text
/// delta, the finish chunk (with the usage, unless the client asked for the
/// usage-only chunk at the end), then `[DONE]`.
#[derive(Debug)]
pub struct StreamEncoder {
    meta: Meta,
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
            held: None,
            usage: None,
        }
    }

    pub fn push(&mut self, ev: &StreamEvent) -> Vec<SseEvent> {
        match ev {
            StreamEvent::Text(t) => vec![data(completion(&self.meta, self.meta.created, t, None))],
            StreamEvent::Finish(f) => {
                let chunk = completion(&self.meta, self.meta.created, "", Some(f));
                if self.meta.wants_usage {
                    vec![data(chunk)]
                } else {
                    self.held = Some(chunk);
                    Vec::new()
                }
            }
            StreamEvent::Usage(u) => {
                self.usage = Some(*u);
                Vec::new()
            }
            _ => Vec::new(),
        }
    }

    pub fn finish(&mut self) -> Vec<SseEvent> {
        let mut out = Vec::new();
        if let Some(mut held) = self.held.take() {
            if let Some(u) = &self.usage {
                held["usage"] = encode_usage(u);
            }
            out.push(data(held));
        }
        if self.meta.wants_usage {
            if let Some(u) = &self.usage {
                let mut last = completion(&self.meta, self.meta.created, "", None);
                last["choices"] = json!([]);
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

    fn meta() -> Meta {
        Meta {
            request_id: "r".into(),
            model: "m".into(),
            created: 3,
            wants_usage: false,
        }
    }

    #[test]
    fn prompt_is_one_user_turn_with_the_protocol_default_cap() {
        let r = parse_request(&json!({"model": "m", "prompt": "Say hi", "stop": "\n"})).unwrap();
        assert_eq!(r.messages, vec![Message::text(Role::User, "Say hi")]);
        assert_eq!(r.max_tokens, Some(DEFAULT_MAX_TOKENS));
        assert_eq!(r.sampling.stop, ["\n"]);
        for body in [
            json!({"prompt": ["a", "b"]}),
            json!({"prompt": "a", "echo": true}),
            json!({"prompt": "a", "suffix": "z"}),
        ] {
            assert!(
                matches!(parse_request(&body), Err(TranslateError::Unsupported(_))),
                "{body}"
            );
        }
    }

    #[test]
    fn answers_in_text_completion_shape() {
        let r = Response {
            content: vec![
                Block::Thinking {
                    text: "t".into(),
                    signature: None,
                },
                Block::Text("hello".into()),
            ],
            finish: Some(FinishReason::Length),
            usage: Some(Usage {
                input_tokens: 2,
                output_tokens: 5,
                ..Usage::default()
            }),
            ..Response::default()
        };
        let out = encode_response(&r, &meta());
        assert_eq!(out["object"], "text_completion");
        assert_eq!(out["choices"][0]["text"], "hello");
        assert_eq!(out["choices"][0]["finish_reason"], "length");
        assert_eq!(out["usage"]["total_tokens"], 7);
        let back = parse_response(&out).unwrap();
        assert_eq!(back.content, vec![Block::Text("hello".into())]);
    }

    #[test]
    fn streams_text_then_finish_then_done() {
        let mut e = StreamEncoder::new(meta());
        let mut out = Vec::new();
        for ev in [
            StreamEvent::Start { id: None },
            StreamEvent::Text("a".into()),
            StreamEvent::Finish(FinishReason::Stop),
            StreamEvent::Usage(Usage {
                input_tokens: 1,
                output_tokens: 1,
                ..Usage::default()
            }),
        ] {
            out.extend(e.push(&ev));
        }
        out.extend(e.finish());
        assert_eq!(out.len(), 3);
        assert_eq!(out[2].data, "[DONE]");
        let mut p = StreamParser::default();
        let mut back = Vec::new();
        for ev in &out {
            back.extend(p.push(ev).unwrap());
        }
        assert!(p.complete());
        assert_eq!(back[1], StreamEvent::Text("a".into()));
        assert_eq!(back[2], StreamEvent::Finish(FinishReason::Stop));
    }
}
