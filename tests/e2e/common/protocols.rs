//! Typed builders for the five client protocols: a conversation written once
//! ([`Ask`]) becomes each protocol's request (route, key placement, body),
//! and each protocol's answer, plain or streamed, is read back into one
//! [`Answer`] — so a test states what it expects once and checks it in
//! every cell of the client × vendor matrix.

#![allow(dead_code)]

use futures_util::StreamExt;
use serde_json::{json, Map, Value};

/// A client protocol, as a client speaks it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Client {
    Chat,
    Completions,
    Responses,
    Messages,
    Gemini,
}

pub const CLIENTS: [Client; 5] = [
    Client::Chat,
    Client::Completions,
    Client::Responses,
    Client::Messages,
    Client::Gemini,
];

/// A tool call, as the assistant made it.
#[derive(Debug, Clone, PartialEq)]
pub struct Call {
    pub id: String,
    pub name: String,
    pub args: Value,
}

/// One turn of a conversation.
#[derive(Debug, Clone)]
pub enum Turn {
    User(String),
    /// An assistant turn, as the client got it earlier (thinking with its
    /// signature, text, calls).
    Assistant {
        thinking: Option<(String, Option<String>)>,
        text: String,
        calls: Vec<Call>,
    },
    /// Results for earlier calls: (call, result text).
    Results(Vec<(Call, String)>),
}

/// How an OpenAI chat client switches thinking off: the three spellings
/// of spec §4.3.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum ThinkingOff {
    /// `reasoning_effort: "none"`
    #[default]
    ReasoningEffortNone,
    /// `enable_thinking: false`
    EnableThinkingFalse,
    /// `thinking: {"type": "disabled"}`
    ThinkingDisabled,
}

impl ThinkingOff {
    pub const ALL: [ThinkingOff; 3] = [
        ThinkingOff::ReasoningEffortNone,
        ThinkingOff::EnableThinkingFalse,
        ThinkingOff::ThinkingDisabled,
    ];
}

/// What a test asks, in neutral terms.
#[derive(Debug, Clone)]
pub struct Ask {
    pub model: String,
    pub system: Option<String>,
    pub turns: Vec<Turn>,
    pub stream: bool,
    pub max_tokens: Option<u64>,
    /// Tool names the model may call (schemas are `{"type":"object"}`).
    pub tools: Vec<String>,
    /// `Some(true)`: ask for thinking; `Some(false)`: switch it off.
    pub thinking: Option<bool>,
    /// How an OpenAI chat client says off (the other protocols have one way).
    pub chat_thinking_off: ThinkingOff,
    pub stop: Vec<String>,
    pub temperature: Option<f64>,
    pub top_p: Option<f64>,
}

impl Ask {
    pub fn new(model: &str, text: &str) -> Self {
        Ask {
            model: model.to_string(),
            system: None,
            turns: vec![Turn::User(text.to_string())],
            stream: false,
            max_tokens: None,
            tools: Vec::new(),
            thinking: None,
            chat_thinking_off: ThinkingOff::default(),
            stop: Vec::new(),
            temperature: None,
            top_p: None,
        }
    }

    pub fn streamed(mut self, stream: bool) -> Self {
        self.stream = stream;
        self
    }

    pub fn system(mut self, s: &str) -> Self {
        self.system = Some(s.to_string());
        self
    }

    pub fn tools(mut self, names: &[&str]) -> Self {
        self.tools = names.iter().map(|n| n.to_string()).collect();
        self
    }

    pub fn max_tokens(mut self, n: u64) -> Self {
        self.max_tokens = Some(n);
        self
    }

    pub fn thinking(mut self, on: bool) -> Self {
        self.thinking = Some(on);
        self
    }

    /// Thinking off, spelt this way by an OpenAI chat client.
    pub fn thinking_off_as(mut self, spelling: ThinkingOff) -> Self {
        self.thinking = Some(false);
        self.chat_thinking_off = spelling;
        self
    }

    pub fn stop(mut self, s: &str) -> Self {
        self.stop.push(s.to_string());
        self
    }

    pub fn temperature(mut self, t: f64) -> Self {
        self.temperature = Some(t);
        self
    }

    pub fn top_p(mut self, p: f64) -> Self {
        self.top_p = Some(p);
        self
    }

    /// Continues the conversation: the answer as the assistant's turn, then `next`.
    pub fn then(mut self, answer: &Answer, next: Turn) -> Self {
        self.turns.push(Turn::Assistant {
            thinking: (!answer.thinking.is_empty() || answer.signature.is_some())
                .then(|| (answer.thinking.clone(), answer.signature.clone())),
            text: answer.text.clone(),
            calls: answer.calls.clone(),
        });
        self.turns.push(next);
        self
    }
}

/// An answer in neutral terms.
#[derive(Debug, Clone, Default)]
pub struct Answer {
    pub status: u16,
    /// The answer's text (a stream's as it went out, deltas included, when
    /// it never finished).
    pub text: String,
    pub thinking: String,
    pub signature: Option<String>,
    pub calls: Vec<Call>,
    /// The protocol's own finish word (`stop`, `end_turn`, `STOP`, a
    /// Responses status or incomplete reason).
    pub finish: Option<String>,
    /// (input incl. cache, output, cache read, cache write), as the client
    /// protocol reports them, converted to canonical terms.
    pub usage: Option<(u64, u64, u64, u64)>,
    /// A streamed answer's `(event name, data)` pairs.
    pub events: Vec<(Option<String>, String)>,
    /// The error body, for non-2xx answers and error events.
    pub error: Option<Value>,
    pub request_id: String,
}

fn schema() -> Value {
    json!({"type": "object", "properties": {"query": {"type": "string"}}})
}

impl Client {
    pub fn name(self) -> &'static str {
        match self {
            Client::Chat => "openai-chat",
            Client::Completions => "openai-completions",
            Client::Responses => "openai-responses",
            Client::Messages => "anthropic-messages",
            Client::Gemini => "gemini",
        }
    }

    /// Whether the protocol can carry tool calls / thinking / signatures.
    pub fn has_tools(self) -> bool {
        self != Client::Completions
    }
    pub fn has_thinking(self) -> bool {
        self != Client::Completions
    }
    /// The Responses protocol has no stop sequences.
    pub fn has_stop(self) -> bool {
        self != Client::Responses
    }
    pub fn has_signatures(self) -> bool {
        matches!(self, Client::Responses | Client::Messages | Client::Gemini)
    }

    pub fn path(self, ask: &Ask) -> String {
        match self {
            Client::Chat => "/v1/chat/completions".into(),
            Client::Completions => "/v1/completions".into(),
            Client::Responses => "/v1/responses".into(),
            Client::Messages => "/v1/messages".into(),
            Client::Gemini if ask.stream => {
                format!("/v1beta/models/{}:streamGenerateContent?alt=sse", ask.model)
            }
            Client::Gemini => format!("/v1beta/models/{}:generateContent", ask.model),
        }
    }

    /// The request, with the key where the protocol's SDK puts it.
    pub fn request(
        self,
        http: &reqwest::Client,
        base: &str,
        key: &str,
        ask: &Ask,
    ) -> reqwest::RequestBuilder {
        let b = http
            .post(format!("{base}{}", self.path(ask)))
            .json(&self.body(ask));
        match self {
            Client::Messages => b
                .header("x-api-key", key)
                .header("anthropic-version", "2023-06-01"),
            Client::Gemini => b.header("x-goog-api-key", key),
            _ => b.bearer_auth(key),
        }
    }

    pub fn body(self, ask: &Ask) -> Value {
        match self {
            Client::Chat => chat_body(ask),
            Client::Completions => completions_body(ask),
            Client::Responses => responses_body(ask),
            Client::Messages => messages_body(ask),
            Client::Gemini => gemini_body(ask),
        }
    }

    /// Sends the ask and reads the answer.
    pub async fn ask(self, http: &reqwest::Client, base: &str, key: &str, ask: &Ask) -> Answer {
        let resp = self
            .request(http, base, key, ask)
            .send()
            .await
            .expect("the gateway answers");
        self.read(resp, ask.stream).await
    }

    pub async fn read(self, resp: reqwest::Response, stream: bool) -> Answer {
        let status = resp.status().as_u16();
        let request_id = resp
            .headers()
            .get("x-request-id")
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_string();
        if status != 200 || !stream {
            let v: Value = resp.json().await.unwrap_or(Value::Null);
            let mut a = if status == 200 {
                self.read_plain(&v)
            } else {
                Answer {
                    error: Some(v),
                    ..Answer::default()
                }
            };
            a.status = status;
            a.request_id = request_id;
            return a;
        }
        let events: Vec<(Option<String>, String)> =
            gateway::sse::events(resp.bytes_stream(), 1 << 22)
                .filter_map(|e| async move { e.ok().map(|e| (e.event, e.data)) })
                .collect()
                .await;
        let mut a = self.read_stream(&events);
        a.status = status;
        a.request_id = request_id;
        a.events = events;
        a
    }

    fn read_plain(self, v: &Value) -> Answer {
        let mut a = Answer::default();
        match self {
            Client::Chat => {
                let m = &v["choices"][0]["message"];
                a.text = m["content"].as_str().unwrap_or("").to_string();
                a.thinking = m["reasoning_content"].as_str().unwrap_or("").to_string();
                for c in m["tool_calls"].as_array().into_iter().flatten() {
                    a.calls.push(Call {
                        id: c["id"].as_str().unwrap_or("").into(),
                        name: c["function"]["name"].as_str().unwrap_or("").into(),
                        args: serde_json::from_str(
                            c["function"]["arguments"].as_str().unwrap_or("null"),
                        )
                        .unwrap_or(Value::Null),
                    });
                }
                a.finish = v["choices"][0]["finish_reason"]
                    .as_str()
                    .map(str::to_string);
                a.usage = openai_usage(&v["usage"]);
            }
            Client::Completions => {
                a.text = v["choices"][0]["text"].as_str().unwrap_or("").to_string();
                a.finish = v["choices"][0]["finish_reason"]
                    .as_str()
                    .map(str::to_string);
                a.usage = openai_usage(&v["usage"]);
            }
            Client::Responses => {
                for item in v["output"].as_array().into_iter().flatten() {
                    read_responses_item(item, &mut a);
                }
                a.finish = Some(responses_finish(v));
                a.usage = responses_usage(&v["usage"]);
            }
            Client::Messages => {
                for b in v["content"].as_array().into_iter().flatten() {
                    match b["type"].as_str() {
                        Some("text") => a.text.push_str(b["text"].as_str().unwrap_or("")),
                        Some("thinking") => {
                            a.thinking.push_str(b["thinking"].as_str().unwrap_or(""));
                            a.signature = b["signature"]
                                .as_str()
                                .filter(|s| !s.is_empty())
                                .map(str::to_string);
                        }
                        Some("tool_use") => a.calls.push(Call {
                            id: b["id"].as_str().unwrap_or("").into(),
                            name: b["name"].as_str().unwrap_or("").into(),
                            args: b["input"].clone(),
                        }),
                        _ => {}
                    }
                }
                a.finish = v["stop_reason"].as_str().map(str::to_string);
                a.usage = anthropic_usage(&v["usage"]);
            }
            Client::Gemini => {
                read_gemini_parts(&v["candidates"][0]["content"]["parts"], &mut a);
                a.finish = v["candidates"][0]["finishReason"]
                    .as_str()
                    .map(str::to_string);
                a.usage = gemini_usage(&v["usageMetadata"]);
            }
        }
        a
    }

    fn read_stream(self, events: &[(Option<String>, String)]) -> Answer {
        let mut a = Answer::default();
        let json = |d: &str| serde_json::from_str::<Value>(d).unwrap_or(Value::Null);
        match self {
            Client::Chat | Client::Completions => {
                let mut args: Vec<String> = Vec::new();
                for (_, d) in events {
                    if d == "[DONE]" {
                        continue;
                    }
                    let v = json(d);
                    if v.get("error").is_some() {
                        a.error = Some(v);
                        continue;
                    }
                    let c = &v["choices"][0];
                    if self == Client::Completions {
                        a.text.push_str(c["text"].as_str().unwrap_or(""));
                    } else {
                        let delta = &c["delta"];
                        a.text.push_str(delta["content"].as_str().unwrap_or(""));
                        a.thinking
                            .push_str(delta["reasoning_content"].as_str().unwrap_or(""));
                        for t in delta["tool_calls"].as_array().into_iter().flatten() {
                            let i = t["index"].as_u64().unwrap_or(0) as usize;
                            while a.calls.len() <= i {
                                a.calls.push(Call {
                                    id: String::new(),
                                    name: String::new(),
                                    args: Value::Null,
                                });
                                args.push(String::new());
                            }
                            if let Some(id) = t["id"].as_str() {
                                a.calls[i].id = id.into();
                            }
                            if let Some(n) = t["function"]["name"].as_str() {
                                a.calls[i].name = n.into();
                            }
                            args[i].push_str(t["function"]["arguments"].as_str().unwrap_or(""));
                        }
                    }
                    if let Some(f) = c["finish_reason"].as_str() {
                        a.finish = Some(f.into());
                    }
                    if let Some(u) = openai_usage(&v["usage"]) {
                        a.usage = Some(u);
                    }
                }
                for (c, s) in a.calls.iter_mut().zip(args) {
                    c.args = serde_json::from_str(&s).unwrap_or(Value::String(s));
                }
            }
            Client::Responses => {
                // The text deltas, for a stream that never completes.
                let mut streamed = String::new();
                for (_, d) in events {
                    let v = json(d);
                    match v["type"].as_str().unwrap_or("") {
                        "response.output_text.delta" => {
                            streamed.push_str(v["delta"].as_str().unwrap_or(""));
                        }
                        "response.completed" | "response.incomplete" => {
                            let r = &v["response"];
                            for item in r["output"].as_array().into_iter().flatten() {
                                read_responses_item(item, &mut a);
                            }
                            a.finish = Some(responses_finish(r));
                            a.usage = responses_usage(&r["usage"]);
                        }
                        _ if v.get("error").is_some() => a.error = Some(v),
                        _ => {}
                    }
                }
                if a.finish.is_none() {
                    a.text = streamed;
                }
            }
            Client::Messages => {
                let mut blocks: Vec<Value> = Vec::new();
                let mut args: Vec<String> = Vec::new();
                let mut usage = json!({});
                for (name, d) in events {
                    let v = json(d);
                    match name.as_deref() {
                        Some("message_start") => usage = v["message"]["usage"].clone(),
                        Some("content_block_start") => {
                            blocks.push(v["content_block"].clone());
                            args.push(String::new());
                        }
                        Some("content_block_delta") => {
                            let i = v["index"].as_u64().unwrap_or(0) as usize;
                            let delta = &v["delta"];
                            match delta["type"].as_str() {
                                Some("text_delta") => {
                                    a.text.push_str(delta["text"].as_str().unwrap_or(""))
                                }
                                Some("thinking_delta") => a
                                    .thinking
                                    .push_str(delta["thinking"].as_str().unwrap_or("")),
                                Some("signature_delta") => {
                                    a.signature = delta["signature"].as_str().map(str::to_string)
                                }
                                Some("input_json_delta") => {
                                    args[i].push_str(delta["partial_json"].as_str().unwrap_or(""))
                                }
                                _ => {}
                            }
                        }
                        Some("message_delta") => {
                            a.finish = v["delta"]["stop_reason"].as_str().map(str::to_string);
                            if let (Some(m), Some(n)) =
                                (usage.as_object_mut(), v["usage"].as_object())
                            {
                                for (k, x) in n {
                                    m.insert(k.clone(), x.clone());
                                }
                            }
                        }
                        Some("error") => a.error = Some(v),
                        _ => {}
                    }
                }
                for (b, s) in blocks.iter().zip(args) {
                    if b["type"] == "tool_use" {
                        a.calls.push(Call {
                            id: b["id"].as_str().unwrap_or("").into(),
                            name: b["name"].as_str().unwrap_or("").into(),
                            args: if s.is_empty() {
                                b["input"].clone()
                            } else {
                                serde_json::from_str(&s).unwrap_or(Value::String(s))
                            },
                        });
                    }
                }
                if a.finish.is_some() {
                    a.usage = anthropic_usage(&usage);
                }
            }
            Client::Gemini => {
                for (_, d) in events {
                    let v = json(d);
                    if v.get("error").is_some() {
                        a.error = Some(v);
                        continue;
                    }
                    read_gemini_parts(&v["candidates"][0]["content"]["parts"], &mut a);
                    if let Some(f) = v["candidates"][0]["finishReason"].as_str() {
                        a.finish = Some(f.into());
                    }
                    if let Some(u) = gemini_usage(&v["usageMetadata"]) {
                        a.usage = Some(u);
                    }
                }
            }
        }
        a
    }
}

fn n(v: &Value) -> u64 {
    v.as_u64().unwrap_or(0)
}

fn openai_usage(u: &Value) -> Option<(u64, u64, u64, u64)> {
    u.is_object().then(|| {
        (
            n(&u["prompt_tokens"]),
            n(&u["completion_tokens"]),
            n(&u["prompt_tokens_details"]["cached_tokens"]),
            n(&u["prompt_tokens_details"]["cache_write_tokens"]),
        )
    })
}

fn responses_usage(u: &Value) -> Option<(u64, u64, u64, u64)> {
    u.is_object().then(|| {
        (
            n(&u["input_tokens"]),
            n(&u["output_tokens"]),
            n(&u["input_tokens_details"]["cached_tokens"]),
            0,
        )
    })
}

fn anthropic_usage(u: &Value) -> Option<(u64, u64, u64, u64)> {
    u.is_object().then(|| {
        let (r, w) = (
            n(&u["cache_read_input_tokens"]),
            n(&u["cache_creation_input_tokens"]),
        );
        (n(&u["input_tokens"]) + r + w, n(&u["output_tokens"]), r, w)
    })
}

fn gemini_usage(u: &Value) -> Option<(u64, u64, u64, u64)> {
    u.is_object().then(|| {
        (
            n(&u["promptTokenCount"]),
            n(&u["candidatesTokenCount"]) + n(&u["thoughtsTokenCount"]),
            n(&u["cachedContentTokenCount"]),
            0,
        )
    })
}

fn responses_finish(r: &Value) -> String {
    match r["status"].as_str() {
        Some("incomplete") => r["incomplete_details"]["reason"]
            .as_str()
            .unwrap_or("incomplete")
            .to_string(),
        Some(s) => s.to_string(),
        None => String::new(),
    }
}

fn read_responses_item(item: &Value, a: &mut Answer) {
    match item["type"].as_str() {
        Some("message") => {
            for p in item["content"].as_array().into_iter().flatten() {
                a.text.push_str(p["text"].as_str().unwrap_or(""));
            }
        }
        Some("reasoning") => {
            for p in item["summary"].as_array().into_iter().flatten() {
                a.thinking.push_str(p["text"].as_str().unwrap_or(""));
            }
            a.signature = item["encrypted_content"].as_str().map(str::to_string);
        }
        Some("function_call") => a.calls.push(Call {
            id: item["call_id"].as_str().unwrap_or("").into(),
            name: item["name"].as_str().unwrap_or("").into(),
            args: serde_json::from_str(item["arguments"].as_str().unwrap_or("null"))
                .unwrap_or(Value::Null),
        }),
        _ => {}
    }
}

fn read_gemini_parts(parts: &Value, a: &mut Answer) {
    for p in parts.as_array().into_iter().flatten() {
        if let Some(s) = p["thoughtSignature"].as_str() {
            a.signature = Some(s.to_string());
        }
        if p["thought"] == json!(true) {
            a.thinking.push_str(p["text"].as_str().unwrap_or(""));
        } else if let Some(c) = p.get("functionCall") {
            a.calls.push(Call {
                id: c["id"].as_str().unwrap_or("").into(),
                name: c["name"].as_str().unwrap_or("").into(),
                args: c["args"].clone(),
            });
        } else {
            a.text.push_str(p["text"].as_str().unwrap_or(""));
        }
    }
}

fn chat_body(ask: &Ask) -> Value {
    let mut messages = Vec::new();
    if let Some(s) = &ask.system {
        messages.push(json!({"role": "system", "content": s}));
    }
    for t in &ask.turns {
        match t {
            Turn::User(s) => messages.push(json!({"role": "user", "content": s})),
            Turn::Assistant { text, calls, .. } => {
                let mut m = json!({"role": "assistant", "content": if calls.is_empty() { json!(text) } else { Value::Null }});
                if !calls.is_empty() {
                    m["tool_calls"] = calls
                        .iter()
                        .map(|c| json!({"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.args.to_string()}}))
                        .collect();
                }
                messages.push(m);
            }
            Turn::Results(rs) => {
                for (c, r) in rs {
                    messages.push(json!({"role": "tool", "tool_call_id": c.id, "content": r}));
                }
            }
        }
    }
    let mut b = json!({"model": ask.model, "messages": messages});
    if ask.stream {
        b["stream"] = json!(true);
        b["stream_options"] = json!({"include_usage": true});
    }
    if let Some(m) = ask.max_tokens {
        b["max_tokens"] = json!(m);
    }
    if !ask.tools.is_empty() {
        b["tools"] = ask
            .tools
            .iter()
            .map(|t| json!({"type": "function", "function": {"name": t, "parameters": schema()}}))
            .collect();
    }
    match ask.thinking {
        Some(true) => b["reasoning_effort"] = json!("low"),
        Some(false) => match ask.chat_thinking_off {
            ThinkingOff::ReasoningEffortNone => b["reasoning_effort"] = json!("none"),
            ThinkingOff::EnableThinkingFalse => b["enable_thinking"] = json!(false),
            ThinkingOff::ThinkingDisabled => b["thinking"] = json!({"type": "disabled"}),
        },
        None => {}
    }
    if !ask.stop.is_empty() {
        b["stop"] = json!(ask.stop);
    }
    if let Some(t) = ask.temperature {
        b["temperature"] = json!(t);
    }
    if let Some(p) = ask.top_p {
        b["top_p"] = json!(p);
    }
    b
}

fn text_of(ask: &Ask) -> String {
    ask.turns
        .iter()
        .filter_map(|t| match t {
            Turn::User(s) => Some(s.clone()),
            _ => None,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

fn completions_body(ask: &Ask) -> Value {
    let mut b = json!({"model": ask.model, "prompt": text_of(ask),
                       "max_tokens": ask.max_tokens.unwrap_or(200)});
    if ask.stream {
        b["stream"] = json!(true);
        b["stream_options"] = json!({"include_usage": true});
    }
    if !ask.stop.is_empty() {
        b["stop"] = json!(ask.stop);
    }
    if let Some(t) = ask.temperature {
        b["temperature"] = json!(t);
    }
    if let Some(p) = ask.top_p {
        b["top_p"] = json!(p);
    }
    b
}

fn responses_body(ask: &Ask) -> Value {
    let mut input = Vec::new();
    for t in &ask.turns {
        match t {
            Turn::User(s) => {
                input.push(json!({"role": "user", "content": [{"type": "input_text", "text": s}]}))
            }
            Turn::Assistant {
                thinking,
                text,
                calls,
            } => {
                if let Some((t, sig)) = thinking {
                    let mut item = json!({"type": "reasoning", "summary": [{"type": "summary_text", "text": t}]});
                    if let Some(s) = sig {
                        item["encrypted_content"] = json!(s);
                    }
                    input.push(item);
                }
                if !text.is_empty() {
                    input.push(json!({"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": text}]}));
                }
                for c in calls {
                    input.push(json!({"type": "function_call", "call_id": c.id, "name": c.name, "arguments": c.args.to_string()}));
                }
            }
            Turn::Results(rs) => {
                for (c, r) in rs {
                    input.push(
                        json!({"type": "function_call_output", "call_id": c.id, "output": r}),
                    );
                }
            }
        }
    }
    let mut b = json!({"model": ask.model, "input": input});
    if let Some(s) = &ask.system {
        b["instructions"] = json!(s);
    }
    if ask.stream {
        b["stream"] = json!(true);
    }
    if let Some(m) = ask.max_tokens {
        b["max_output_tokens"] = json!(m);
    }
    if !ask.tools.is_empty() {
        b["tools"] = ask
            .tools
            .iter()
            .map(|t| json!({"type": "function", "name": t, "parameters": schema()}))
            .collect();
    }
    match ask.thinking {
        Some(true) => b["reasoning"] = json!({"effort": "low"}),
        Some(false) => b["reasoning"] = json!({"effort": "none"}),
        None => {}
    }
    if let Some(t) = ask.temperature {
        b["temperature"] = json!(t);
    }
    if let Some(p) = ask.top_p {
        b["top_p"] = json!(p);
    }
    b
}

fn messages_body(ask: &Ask) -> Value {
    let mut messages = Vec::new();
    for t in &ask.turns {
        match t {
            Turn::User(s) => messages.push(json!({"role": "user", "content": s})),
            Turn::Assistant {
                thinking,
                text,
                calls,
            } => {
                let mut content = Vec::new();
                if let Some((t, Some(sig))) = thinking {
                    content.push(json!({"type": "thinking", "thinking": t, "signature": sig}));
                }
                if !text.is_empty() {
                    content.push(json!({"type": "text", "text": text}));
                }
                for c in calls {
                    content.push(
                        json!({"type": "tool_use", "id": c.id, "name": c.name, "input": c.args}),
                    );
                }
                messages.push(json!({"role": "assistant", "content": content}));
            }
            Turn::Results(rs) => {
                let content: Vec<Value> = rs
                    .iter()
                    .map(|(c, r)| json!({"type": "tool_result", "tool_use_id": c.id, "content": r}))
                    .collect();
                messages.push(json!({"role": "user", "content": content}));
            }
        }
    }
    let mut b = json!({"model": ask.model, "messages": messages, "max_tokens": ask.max_tokens.unwrap_or(1024)});
    if let Some(s) = &ask.system {
        b["system"] = json!(s);
    }
    if ask.stream {
        b["stream"] = json!(true);
    }
    if !ask.tools.is_empty() {
        b["tools"] = ask
            .tools
            .iter()
            .map(|t| json!({"name": t, "input_schema": schema()}))
            .collect();
    }
    match ask.thinking {
        Some(true) => b["thinking"] = json!({"type": "enabled", "budget_tokens": 1024}),
        Some(false) => b["thinking"] = json!({"type": "disabled"}),
        None => {}
    }
    if !ask.stop.is_empty() {
        b["stop_sequences"] = json!(ask.stop);
    }
    if let Some(t) = ask.temperature {
        b["temperature"] = json!(t);
    }
    if let Some(p) = ask.top_p {
        b["top_p"] = json!(p);
    }
    b
}

fn gemini_body(ask: &Ask) -> Value {
    let mut contents = Vec::new();
    for t in &ask.turns {
        match t {
            Turn::User(s) => contents.push(json!({"role": "user", "parts": [{"text": s}]})),
            Turn::Assistant {
                thinking,
                text,
                calls,
            } => {
                let mut parts = Vec::new();
                let mut sig = None;
                if let Some((t, s)) = thinking {
                    if !t.is_empty() {
                        parts.push(json!({"text": t, "thought": true}));
                    }
                    sig = s.clone();
                }
                if !text.is_empty() {
                    let mut p = json!({"text": text});
                    if let Some(s) = sig.take() {
                        p["thoughtSignature"] = json!(s);
                    }
                    parts.push(p);
                }
                for c in calls {
                    let mut p = json!({"functionCall": {"name": c.name, "args": c.args}});
                    if let Some(s) = sig.take() {
                        p["thoughtSignature"] = json!(s);
                    }
                    parts.push(p);
                }
                contents.push(json!({"role": "model", "parts": parts}));
            }
            Turn::Results(rs) => {
                let parts: Vec<Value> = rs
                    .iter()
                    .map(|(c, r)| json!({"functionResponse": {"name": c.name, "response": {"result": r}}}))
                    .collect();
                contents.push(json!({"role": "user", "parts": parts}));
            }
        }
    }
    let mut b = json!({"contents": contents});
    if let Some(s) = &ask.system {
        b["systemInstruction"] = json!({"parts": [{"text": s}]});
    }
    let mut config = Map::new();
    if let Some(m) = ask.max_tokens {
        config.insert("maxOutputTokens".into(), json!(m));
    }
    match ask.thinking {
        // The google-genai SDK writes the inner keys in snake_case.
        Some(true) => {
            config.insert(
                "thinkingConfig".into(),
                json!({"include_thoughts": true, "thinking_budget": 1024}),
            );
        }
        Some(false) => {
            config.insert("thinkingConfig".into(), json!({"thinking_budget": 0}));
        }
        None => {}
    }
    if !ask.stop.is_empty() {
        config.insert("stopSequences".into(), json!(ask.stop));
    }
    if let Some(t) = ask.temperature {
        config.insert("temperature".into(), json!(t));
    }
    if let Some(p) = ask.top_p {
        config.insert("topP".into(), json!(p));
    }
    if !config.is_empty() {
        b["generationConfig"] = Value::Object(config);
    }
    if !ask.tools.is_empty() {
        b["tools"] = json!([{"functionDeclarations": ask.tools.iter().map(|t| json!({"name": t, "parametersJsonSchema": schema()})).collect::<Vec<_>>()}]);
    }
    b
}
