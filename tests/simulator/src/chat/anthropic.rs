//! `POST /v1/messages`: the Anthropic Messages API, from the shared plan
//! (the rules are in the module `chat`). What is its own:
//!
//! - **Headers.** `x-api-key: <key>` (checked by the auth layer; a bearer
//!   token is refused) and `anthropic-version` (any value; without it, 400
//!   `anthropic-version: header is required`).
//! - **Body.** `max_tokens` and `messages` are required (400 without
//!   them); `stream: true` streams.
//! - **Turns.** `system` (a string or an array of text blocks) is one system
//!   turn. A message's `content` is a string or blocks: `text` counts,
//!   `tool_result` (`content` a string or text blocks) is a tool result,
//!   while `image`, `tool_use`, `thinking` and `redacted_thinking` add no
//!   words. The last message is a tool result turn when it is a `user`
//!   message with `tool_result` blocks.
//! - **Usage.** `input_tokens` = prompt − cache read − cache write,
//!   `cache_read_input_tokens` = the system turn's tokens (words + 1, 0
//!   without `system`), `cache_creation_input_tokens` = the words of the
//!   first user turn (no +1), `output_tokens` = reasoning + answer.
//! - **Thinking signatures.** A thinking block's `signature` is standard
//!   padded base64 of the ASCII text `sim-sig:<16 hex digits of
//!   fnv1a(thinking text)>` ([`signature`]). Every `thinking` block sent back
//!   in an assistant turn must carry exactly that signature for its own text,
//!   else 400 ``Invalid `signature` in `thinking` block``;
//!   `redacted_thinking` is accepted as is.
//! - **Tools.** `tools[].name`; `tool_choice.type` `auto` / `any` (the first
//!   tool), `tool` (the one named, forced) or `none`. Call ids are
//!   `toolu_<hex>` (the hex of the shared rule).
//! - **Answer.** `{"id": "msg_sim_<n>", "type": "message", "role":
//!   "assistant", "model": <as sent>, "content": [...], "stop_reason",
//!   "stop_sequence", "usage"}`. Blocks in order: `{"type": "thinking",
//!   "thinking", "signature"}` when thinking, then `{"type": "text", "text"}`
//!   (left out when no word is left) or one `{"type": "tool_use", "id",
//!   "name", "input": {...}}` per call; a refusal has no text or tool block.
//!   `stop_sequence` is the matched stop string, else null.
//! - **Streams.** Every event has an `event: <type>` line and `"type"` in its
//!   data: `message_start` (the message with `content: []`, null
//!   `stop_reason` / `stop_sequence`, and the usage with `output_tokens: 1`),
//!   `ping`, then per block (indexes 0, 1, ...) `content_block_start`
//!   (`{"type":"text","text":""}`, `{"type":"thinking","thinking":"",
//!   "signature":""}` or `{"type":"tool_use","id","name","input":{}}`), its
//!   deltas (`thinking_delta` per word then one `signature_delta`;
//!   `text_delta` per word; `input_json_delta` with the arguments in three
//!   `partial_json` fragments) and `content_block_stop`; then `message_delta`
//!   (`{"delta": {"stop_reason", "stop_sequence"}, "usage": {"output_tokens"}}`)
//!   and `message_stop` — the finish marker.

use std::sync::Arc;

use axum::extract::State;
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};
use base64::Engine as _;
use bytes::Bytes;
use serde_json::{json, Value};

use super::deltas::{spaced, thirds};
use super::plan::{Answer, Finish, Plan, ToolCall};
use super::request::{choose_tools, first_user_words, strings, ChatRequest, Role, Turn};
use super::{respond, Rendered, Wire};
use crate::errors::{ApiError, Dialect};
use crate::sse::Out;
use crate::tokens::fnv1a;
use crate::SimState;

/// The signature the simulator gives a thinking text: standard base64 of
/// `sim-sig:<16 hex digits of fnv1a(thinking)>`.
pub fn signature(thinking: &str) -> String {
    base64::engine::general_purpose::STANDARD.encode(format!("sim-sig:{:016x}", fnv1a(thinking)))
}

fn invalid(msg: &str) -> ApiError {
    ApiError::invalid_request(msg, None).in_dialect(Dialect::Anthropic)
}

pub async fn messages(
    State(state): State<Arc<SimState>>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    if !headers.contains_key("anthropic-version") {
        return invalid("anthropic-version: header is required").into_response();
    }
    match parse(&body) {
        Ok(req) => respond(&state, req, Wire::Anthropic).await,
        Err(e) => e.into_response(),
    }
}

fn block_type(b: &Value) -> Option<&str> {
    b.get("type").and_then(Value::as_str)
}

/// The text of a string, or of the `text` blocks of an array.
fn text_of(content: &Value) -> String {
    match content {
        Value::String(s) => s.clone(),
        Value::Array(blocks) => blocks
            .iter()
            .filter(|b| block_type(b) == Some("text"))
            .filter_map(|b| b.get("text").and_then(Value::as_str))
            .collect::<Vec<_>>()
            .join(" "),
        _ => String::new(),
    }
}

/// A message as a turn; assistant turns have their thinking checked.
fn turn(message: &Value) -> Result<Turn, ApiError> {
    let content = message.get("content").unwrap_or(&Value::Null);
    let blocks = content.as_array().map(Vec::as_slice).unwrap_or(&[]);
    let role = match message.get("role").and_then(Value::as_str) {
        Some("user") => Role::User,
        _ => Role::Assistant,
    };
    if role == Role::Assistant {
        for b in blocks.iter().filter(|b| block_type(b) == Some("thinking")) {
            let text = b.get("thinking").and_then(Value::as_str).unwrap_or("");
            let sig = b.get("signature").and_then(Value::as_str).unwrap_or("");
            if sig != signature(text) {
                return Err(invalid("Invalid `signature` in `thinking` block"));
            }
        }
    }
    Ok(Turn {
        role,
        text: text_of(content),
        tool_results: blocks
            .iter()
            .filter(|b| block_type(b) == Some("tool_result"))
            .map(|b| text_of(b.get("content").unwrap_or(&Value::Null)))
            .collect(),
    })
}

/// Reads a Messages API body.
pub fn parse(body: &[u8]) -> Result<ChatRequest, ApiError> {
    let value: Value = serde_json::from_slice(body)
        .map_err(|e| invalid(&format!("The request body is not valid JSON: {e}")))?;
    let obj = value
        .as_object()
        .ok_or_else(|| invalid("The request body must be a JSON object."))?;
    let max_tokens = obj
        .get("max_tokens")
        .and_then(Value::as_u64)
        .ok_or_else(|| invalid("max_tokens: Field required"))?;
    let messages = obj
        .get("messages")
        .and_then(Value::as_array)
        .ok_or_else(|| invalid("messages: Field required"))?;

    let mut turns = Vec::with_capacity(messages.len() + 1);
    if let Some(system) = obj.get("system").filter(|s| !s.is_null()) {
        turns.push(Turn::new(Role::System, text_of(system)));
    }
    for m in messages {
        turns.push(turn(m)?);
    }
    let model = obj
        .get("model")
        .and_then(Value::as_str)
        .unwrap_or("sim-claude");
    let mut req = ChatRequest::from_turns(model, &turns);
    req.cache_write_tokens = first_user_words(&turns);
    req.stream = obj.get("stream").and_then(Value::as_bool).unwrap_or(false);
    req.include_usage = true;
    req.max_tokens = Some(max_tokens);
    let thinking = obj
        .get("thinking")
        .and_then(|t| t.get("type"))
        .and_then(Value::as_str);
    req.thinking_disabled = thinking == Some("disabled");
    req.thinking_enabled = matches!(thinking, Some("enabled" | "adaptive"));
    let names: Vec<String> = obj
        .get("tools")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(|t| t.get("name").and_then(Value::as_str).map(str::to_owned))
                .collect()
        })
        .unwrap_or_default();
    let choice = obj.get("tool_choice");
    let choice_type = choice.and_then(|c| c.get("type")).and_then(Value::as_str);
    let forced = choice
        .filter(|_| choice_type == Some("tool"))
        .and_then(|c| c.get("name"))
        .and_then(Value::as_str);
    (req.tool_name, req.tools) = choose_tools(names, choice_type == Some("none"), forced);
    req.stop = strings(obj.get("stop_sequences"));
    Ok(req)
}

/// `stop_reason` and `stop_sequence`.
fn stop_reason(finish: &Finish) -> (String, Value) {
    match finish {
        Finish::Stop => ("end_turn".into(), Value::Null),
        Finish::Length => ("max_tokens".into(), Value::Null),
        Finish::Tools => ("tool_use".into(), Value::Null),
        Finish::StopSequence(s) => ("stop_sequence".into(), json!(s)),
        Finish::Refused => ("refusal".into(), Value::Null),
        Finish::Raw(r) => (r.clone(), Value::Null),
    }
}

/// The final usage in Anthropic's terms (cache reads and writes apart).
fn usage(plan: &Plan) -> Value {
    let u = &plan.usage;
    json!({
        "input_tokens": u.prompt.saturating_sub(u.cached + u.cache_write),
        "output_tokens": u.completion,
        "cache_creation_input_tokens": u.cache_write,
        "cache_read_input_tokens": u.cached,
    })
}

/// One content block of the answer.
enum Block<'a> {
    Thinking(&'a [String]),
    Text(&'a [String]),
    ToolUse(&'a ToolCall),
}

fn blocks(plan: &Plan) -> Vec<Block<'_>> {
    let mut out = Vec::new();
    if !plan.reasoning.is_empty() {
        out.push(Block::Thinking(&plan.reasoning));
    }
    match &plan.answer {
        Answer::Text(words) if !words.is_empty() => out.push(Block::Text(words)),
        Answer::Text(_) | Answer::Refused => {}
        Answer::Tools(calls) => out.extend(calls.iter().map(Block::ToolUse)),
    }
    out
}

fn tool_id(call: &ToolCall) -> String {
    format!("toolu_{}", call.hex)
}

/// The call's arguments as the `input` object.
fn input(call: &ToolCall) -> Value {
    serde_json::from_str(&call.arguments).unwrap_or_else(|_| json!({}))
}

impl Block<'_> {
    fn whole(&self) -> Value {
        match self {
            Block::Thinking(words) => {
                let text = words.join(" ");
                json!({"type": "thinking", "signature": signature(&text), "thinking": text})
            }
            Block::Text(words) => json!({"type": "text", "text": words.join(" ")}),
            Block::ToolUse(c) => {
                json!({"type": "tool_use", "id": tool_id(c), "name": c.name, "input": input(c)})
            }
        }
    }

    fn start(&self) -> Value {
        match self {
            Block::Thinking(_) => json!({"type": "thinking", "thinking": "", "signature": ""}),
            Block::Text(_) => json!({"type": "text", "text": ""}),
            Block::ToolUse(c) => {
                json!({"type": "tool_use", "id": tool_id(c), "name": c.name, "input": {}})
            }
        }
    }

    fn deltas(&self) -> Vec<Value> {
        match self {
            Block::Thinking(words) => spaced(words)
                .map(|w| json!({"type": "thinking_delta", "thinking": w}))
                .chain([
                    json!({"type": "signature_delta", "signature": signature(&words.join(" "))}),
                ])
                .collect(),
            Block::Text(words) => spaced(words)
                .map(|w| json!({"type": "text_delta", "text": w}))
                .collect(),
            Block::ToolUse(c) => thirds(&c.arguments)
                .into_iter()
                .map(|f| json!({"type": "input_json_delta", "partial_json": f}))
                .collect(),
        }
    }
}

/// The answer and its final usage.
pub(super) fn render(req: &ChatRequest, plan: &Plan, n: u64) -> (Rendered, Option<Value>) {
    let id = format!("msg_sim_{n}");
    let (reason, sequence) = stop_reason(&plan.finish);
    let usage = usage(plan);
    let blocks = blocks(plan);
    if !req.stream {
        let body = json!({
            "id": id, "type": "message", "role": "assistant", "model": req.model,
            "content": blocks.iter().map(Block::whole).collect::<Vec<_>>(),
            "stop_reason": reason, "stop_sequence": sequence, "usage": usage,
        });
        return (Rendered::Plain(body), Some(usage));
    }
    let ev = |data: Value| {
        let name = data["type"].as_str().unwrap_or("").to_owned();
        Out::named(&name, data.to_string())
    };
    let mut start_usage = usage.clone();
    start_usage["output_tokens"] = json!(1);
    let mut events = vec![
        ev(json!({"type": "message_start", "message": {
            "id": id, "type": "message", "role": "assistant", "model": req.model,
            "content": [], "stop_reason": null, "stop_sequence": null, "usage": start_usage}})),
        ev(json!({"type": "ping"})),
    ];
    for (index, block) in blocks.iter().enumerate() {
        events.push(ev(json!({"type": "content_block_start", "index": index,
                              "content_block": block.start()})));
        for delta in block.deltas() {
            events.push(ev(
                json!({"type": "content_block_delta", "index": index, "delta": delta}),
            ));
        }
        events.push(ev(json!({"type": "content_block_stop", "index": index})));
    }
    let finish_at = events.len();
    events.push(ev(json!({"type": "message_delta",
        "delta": {"stop_reason": reason, "stop_sequence": sequence},
        "usage": {"output_tokens": plan.usage.completion}})));
    events.push(ev(json!({"type": "message_stop"})));
    (Rendered::Stream { events, finish_at }, Some(usage))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::chat::plan::plan;
    use crate::tokens::{reply_words, REASONING};

    fn req(v: Value) -> ChatRequest {
        match parse(v.to_string().as_bytes()) {
            Ok(r) => r,
            Err(e) => panic!("{e:?}"),
        }
    }

    #[test]
    fn tokens_and_cache_split() {
        let r = req(
            json!({"model": "m", "max_tokens": 10, "system": "be brief please",
            "messages": [{"role": "user", "content": "one two three"},
                         {"role": "assistant", "content": [{"type": "text", "text": "ok"}]},
                         {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t", "content": "r s"}]}]}),
        );
        // system (3+1) + user (3+1) + assistant (1+1) + tool result (2+1)
        assert_eq!(r.prompt_tokens, 4 + 4 + 2 + 3);
        assert_eq!((r.cached_tokens, r.cache_write_tokens), (4, 3));
        assert_eq!(r.last_tool_result.as_deref(), Some("r s"));
        let u = usage(&plan(&r));
        assert_eq!(u["input_tokens"], 13 - 4 - 3);
    }

    #[test]
    fn thinking_switches_and_signatures() {
        let base = |t: Value| {
            json!({"model": "sim-chat", "max_tokens": 100, "thinking": t,
            "messages": [{"role": "user", "content": "hi"}]})
        };
        assert!(req(base(json!({"type": "enabled", "budget_tokens": 1024}))).thinking_enabled);
        assert!(req(base(json!({"type": "disabled"}))).thinking_disabled);
        let good = signature("hm");
        let ok = json!({"model": "m", "max_tokens": 5, "messages": [
            {"role": "user", "content": "a"},
            {"role": "assistant", "content": [{"type": "thinking", "thinking": "hm", "signature": good}]},
            {"role": "user", "content": "b"}]});
        assert!(parse(ok.to_string().as_bytes()).is_ok());
        let bad = ok.to_string().replace(&signature("hm"), "QUFB");
        assert!(parse(bad.as_bytes()).is_err());
        assert!(
            parse(br#"{"messages": []}"#).is_err(),
            "max_tokens is required"
        );
    }

    #[test]
    fn the_signature_formula() {
        let text = REASONING.join(" ");
        let decoded = base64::engine::general_purpose::STANDARD
            .decode(signature(&text))
            .unwrap_or_default();
        assert_eq!(
            String::from_utf8_lossy(&decoded),
            format!("sim-sig:{:016x}", fnv1a(&text))
        );
        // Padded: 24 bytes of text, so 32 characters without '=' here; a
        // length that is not a multiple of 3 would end in '='.
        assert_eq!(signature(&text).len(), 32);
    }

    #[test]
    fn thinking_spellings_and_what_is_accepted_back() {
        let body = |t: Value| {
            json!({"model": "sim-reasoner", "max_tokens": 100, "thinking": t,
            "messages": [{"role": "user", "content": "hi"}]})
        };
        assert!(req(body(json!({"type": "adaptive"}))).thinks());
        assert!(req(body(Value::Null)).thinks(), "a reasoning model");
        assert!(!req(body(json!({"type": "disabled"}))).thinks());
        // Redacted thinking passes; a thinking block of the user is not checked.
        let r = parse(json!({"max_tokens": 5, "messages": [
            {"role": "assistant", "content": [{"type": "redacted_thinking", "data": "xyz"}]},
            {"role": "user", "content": [{"type": "thinking", "thinking": "t", "signature": "no"}]}]})
        .to_string().as_bytes());
        assert!(r.is_ok());
        let e = parse(
            json!({"max_tokens": 5, "messages": [
            {"role": "assistant", "content": [{"type": "thinking", "thinking": "t"}]}]})
            .to_string()
            .as_bytes(),
        );
        let e = e.err().map(|e| e.body());
        assert_eq!(
            e,
            Some(
                json!({"type": "error", "error": {"type": "invalid_request_error",
                "message": "Invalid `signature` in `thinking` block"}})
            )
        );
    }

    #[test]
    fn turns_skip_images_tool_uses_and_thinking() {
        let r = req(json!({"max_tokens": 9,
            "system": [{"type": "text", "text": "a b"}, {"type": "text", "text": "c"}],
            "messages": [
                {"role": "user", "content": [{"type": "text", "text": "look"},
                                             {"type": "image", "source": {"type": "base64", "data": "x y"}}]},
                {"role": "assistant", "content": [
                    {"type": "thinking", "thinking": "one two", "signature": signature("one two")},
                    {"type": "tool_use", "id": "toolu_1", "name": "f", "input": {"q": "x y z"}}]},
                {"role": "user", "content": [
                    {"type": "tool_result", "tool_use_id": "toolu_1",
                     "content": [{"type": "text", "text": "sunny"}, {"type": "text", "text": "and mild"}]},
                    {"type": "tool_result", "tool_use_id": "toolu_2", "content": "noon exactly", "is_error": true}]}]}));
        // system (3+1), user (1+1), assistant (0+1), results (3+2+1)
        assert_eq!(r.prompt_tokens, 4 + 2 + 1 + 6);
        assert_eq!((r.cached_tokens, r.cache_write_tokens), (4, 1));
        assert_eq!(
            r.last_user, "look",
            "a tool-results-only turn is not the user's"
        );
        assert_eq!(r.last_tool_result.as_deref(), Some("noon exactly"));
    }

    #[test]
    fn tool_choice_spellings() {
        let body = |choice: Value| {
            json!({"max_tokens": 9, "tool_choice": choice,
            "tools": [{"name": "a", "input_schema": {}}, {"name": "b", "input_schema": {}}],
            "messages": [{"role": "user", "content": "q"}]})
        };
        assert_eq!(
            req(body(json!({"type": "auto"}))).tool_name.as_deref(),
            Some("a")
        );
        assert_eq!(
            req(body(json!({"type": "any"}))).tool_name.as_deref(),
            Some("a")
        );
        let forced = req(body(json!({"type": "tool", "name": "b"})));
        assert_eq!(
            (forced.tool_name.as_deref(), forced.tools.len()),
            (Some("b"), 1)
        );
        assert_eq!(req(body(json!({"type": "none"}))).tool_name, None);
    }

    fn plain(body: Value) -> Value {
        let r = req(body);
        match render(&r, &plan(&r), 7) {
            (Rendered::Plain(v), Some(u)) => {
                assert_eq!(v["usage"], u);
                v
            }
            _ => panic!("expected a plain answer"),
        }
    }

    #[test]
    fn plain_answers() {
        let v = plain(json!({"model": "sim-reasoner", "max_tokens": 100,
            "messages": [{"role": "user", "content": "hello"}]}));
        assert_eq!(v["id"], "msg_sim_7");
        assert_eq!(v["model"], "sim-reasoner");
        assert_eq!(v["content"][0]["type"], "thinking");
        assert_eq!(
            v["content"][0]["signature"],
            signature(&REASONING.join(" "))
        );
        assert_eq!(v["content"][1]["text"], reply_words("hello").join(" "));
        assert_eq!(
            (v["stop_reason"].as_str(), &v["stop_sequence"]),
            (Some("end_turn"), &Value::Null)
        );
        assert_eq!(v["usage"]["output_tokens"], 8 + reply_words("hello").len());

        let v = plain(json!({"max_tokens": 100, "stop_sequences": ["reply"],
            "messages": [{"role": "user", "content": "hello"}]}));
        assert_eq!(v["content"], json!([{"type": "text", "text": "Simulated"}]));
        assert_eq!(
            (v["stop_reason"].as_str(), v["stop_sequence"].as_str()),
            (Some("stop_sequence"), Some("reply"))
        );

        let v = plain(
            json!({"max_tokens": 100, "messages": [{"role": "user", "content": "x [[sim:refuse]]"}]}),
        );
        assert_eq!(
            (v["stop_reason"].as_str(), &v["content"]),
            (Some("refusal"), &json!([]))
        );
        assert_eq!(v["usage"]["output_tokens"], 0);

        let v = plain(
            json!({"max_tokens": 100, "messages": [{"role": "user", "content": "x [[sim:finish=pause_turn]]"}]}),
        );
        assert_eq!(v["stop_reason"], "pause_turn");
        assert_eq!(v["content"][0]["type"], "text");

        let v = plain(json!({"max_tokens": 3, "messages": [{"role": "user", "content": "hello"}]}));
        assert_eq!(
            (
                v["stop_reason"].as_str(),
                v["usage"]["output_tokens"].as_u64()
            ),
            (Some("max_tokens"), Some(3))
        );
    }

    #[test]
    fn parallel_tool_uses() {
        let v = plain(json!({"max_tokens": 100,
            "tools": [{"name": "a"}, {"name": "b"}],
            "messages": [{"role": "user", "content": "q w [[sim:parallel]]"}]}));
        assert_eq!(v["stop_reason"], "tool_use");
        assert_eq!(
            v["content"],
            json!([
                {"type": "tool_use", "id": format!("toolu_{:08x}", fnv1a("q w") as u32), "name": "a",
                 "input": {"query": "q w"}},
                {"type": "tool_use", "id": format!("toolu_{:08x}", fnv1a("q w#1") as u32), "name": "b",
                 "input": {"query": "q w", "index": 1}},
            ])
        );
        // 2 + 2 argument words: `{"query":"q`, `w"}` and `{"index":1,"query":"q`, `w"}`.
        assert_eq!(v["usage"]["output_tokens"], 4);
        // After the results, a reply to the last one and no call.
        let v = plain(json!({"max_tokens": 100, "tools": [{"name": "a"}],
            "messages": [{"role": "user", "content": "q"},
                         {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_1", "name": "a", "input": {}}]},
                         {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "noon exactly"}]}]}));
        assert_eq!(v["stop_reason"], "end_turn");
        assert_eq!(
            v["content"][0]["text"],
            reply_words("noon exactly").join(" ")
        );
    }

    #[test]
    fn the_first_delta_follows_the_opening_events() {
        let (events, _) =
            stream(json!({"max_tokens": 100, "messages": [{"role": "user", "content": "a b"}]}));
        let first = super::super::Wire::Anthropic.opening();
        let names: Vec<&str> = events[..=first].iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(
            names,
            [
                "message_start",
                "ping",
                "content_block_start",
                "content_block_delta"
            ]
        );
    }

    fn stream(body: Value) -> (Vec<(String, Value)>, usize) {
        let mut body = body;
        body["stream"] = json!(true);
        let r = req(body);
        let (Rendered::Stream { events, finish_at }, Some(_)) = render(&r, &plan(&r), 1) else {
            panic!("expected a stream")
        };
        let events = events
            .into_iter()
            .map(|e| {
                let data: Value = serde_json::from_str(&e.data).unwrap_or(Value::Null);
                assert_eq!(e.event.as_deref(), data["type"].as_str());
                (e.event.unwrap_or_default(), data)
            })
            .collect();
        (events, finish_at)
    }

    #[test]
    fn stream_event_sequence() {
        let (events, finish_at) = stream(json!({"model": "sim-reasoner", "max_tokens": 11,
            "messages": [{"role": "user", "content": "hello"}]}));
        let names: Vec<&str> = events.iter().map(|(n, _)| n.as_str()).collect();
        let mut expected = vec!["message_start", "ping", "content_block_start"];
        expected.extend(["content_block_delta"; 8 + 1]);
        expected.extend(["content_block_stop", "content_block_start"]);
        expected.extend(["content_block_delta"; 3]);
        expected.extend(["content_block_stop", "message_delta", "message_stop"]);
        assert_eq!(names, expected);
        assert_eq!(names[finish_at], "message_delta");
        let start = &events[0].1["message"];
        assert_eq!(
            (
                start["content"].clone(),
                start["usage"]["output_tokens"].as_u64()
            ),
            (json!([]), Some(1))
        );
        assert_eq!(
            events[2].1["content_block"],
            json!({"type": "thinking", "thinking": "", "signature": ""})
        );
        assert_eq!(events[11].1["delta"]["type"], "signature_delta");
        assert_eq!(events[13].1["index"], 1);
        let text: String = events
            .iter()
            .filter_map(|(_, d)| d["delta"]["text"].as_str())
            .collect();
        assert_eq!(text, "Simulated reply to:");
        let delta = &events[finish_at].1;
        assert_eq!(
            delta["delta"],
            json!({"stop_reason": "max_tokens", "stop_sequence": null})
        );
        assert_eq!(delta["usage"], json!({"output_tokens": 11}));
    }

    #[test]
    fn streamed_tool_input_reassembles() {
        let (events, _) = stream(json!({"max_tokens": 9, "tools": [{"name": "f"}],
            "messages": [{"role": "user", "content": "é x"}]}));
        let start = &events[2].1["content_block"];
        assert_eq!(start["input"], json!({}));
        assert_eq!(start["id"], format!("toolu_{:08x}", fnv1a("é x") as u32));
        let fragments: Vec<&str> = events
            .iter()
            .filter_map(|(_, d)| d["delta"]["partial_json"].as_str())
            .collect();
        assert_eq!(fragments.len(), 3);
        assert_eq!(fragments.concat(), r#"{"query":"é x"}"#);
    }
}
