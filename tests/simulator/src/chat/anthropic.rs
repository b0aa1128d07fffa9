//! `POST /v1/messages`: the Anthropic Messages API, from the same plan as
//! the OpenAI answers (see the module `chat`). What differs:
//!
//! - **Headers.** `x-api-key` (checked by the auth layer) and
//!   `anthropic-version` (any value; without it, 400). `max_tokens` is
//!   required (400 without it).
//! - **Tokens.** The `system` prompt (a string or text blocks) counts as one
//!   turn; a turn's text is its text blocks and its tool results' text
//!   (thinking and tool-call input do not count); each turn is words + 1.
//! - **Cache.** `cache_read_input_tokens` = the system turn's tokens;
//!   `cache_creation_input_tokens` = the words of the first user turn's text
//!   (no +1); `input_tokens` = the prompt tokens minus both.
//! - **Thinking** when the model name contains `reason` or `thinking.type` is
//!   `enabled` / `adaptive`, unless it is `disabled`. A thinking block's
//!   `signature` is standard base64 of `sim-sig:<16 hex digits of
//!   fnv1a(thinking text)>`; one sent back with any other signature is a 400.
//! - **Tools.** `tools[].name`; `tool_choice` `none` / `tool` (forced) /
//!   `auto` / `any`. Ids are `toolu_<hex>` (the same hex as OpenAI's).
//! - **Answer.** `msg_sim_<n>`; blocks in order: thinking, text or tool_use;
//!   `stop_reason` `end_turn`, `max_tokens`, `tool_use`, `stop_sequence`
//!   (with `stop_sequence` set), `refusal`, or a `[[sim:finish=...]]` word.
//! - **Streams** carry an `event:` line on every event and `type` in its
//!   data: `message_start`, `ping`, per block `content_block_start`, deltas
//!   (thinking and text one per word, one `signature_delta`, tool input in
//!   three `input_json_delta` fragments), `content_block_stop`, then
//!   `message_delta` (stop reason, `output_tokens`) and `message_stop`.

use std::sync::Arc;

use axum::extract::State;
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};
use base64::Engine as _;
use bytes::Bytes;
use serde_json::{json, Value};

use super::plan::{Answer, Finish, Plan};
use super::render::{spaced, thirds};
use super::request::{choose_tools, ChatRequest};
use super::{respond, Rendered};
use crate::errors::{ApiError, Dialect};
use crate::faults::extract_directives;
use crate::sse::Out;
use crate::tokens::count_words;
use crate::SimState;

/// The signature the simulator gives a thinking text.
pub fn signature(thinking: &str) -> String {
    base64::engine::general_purpose::STANDARD
        .encode(format!("sim-sig:{:016x}", crate::tokens::fnv1a(thinking)))
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
        Ok(req) => respond(&state, req, Dialect::Anthropic).await,
        Err(e) => e.into_response(),
    }
}

/// Text of the blocks that count (text, tool results' text).
fn counted_text(content: &Value) -> String {
    match content {
        Value::String(s) => s.clone(),
        Value::Array(blocks) => blocks
            .iter()
            .filter_map(|b| match b.get("type").and_then(Value::as_str) {
                Some("text") => b.get("text").and_then(Value::as_str).map(str::to_owned),
                Some("tool_result") => Some(tool_result_text(b)),
                _ => None,
            })
            .collect::<Vec<_>>()
            .join(" "),
        _ => String::new(),
    }
}

fn tool_result_text(block: &Value) -> String {
    match block.get("content") {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Array(parts)) => parts
            .iter()
            .filter_map(|p| p.get("text").and_then(Value::as_str))
            .collect::<Vec<_>>()
            .join(" "),
        _ => String::new(),
    }
}

/// Text blocks only (a user turn's own words).
fn plain_text(content: &Value) -> String {
    match content {
        Value::String(s) => s.clone(),
        Value::Array(blocks) => blocks
            .iter()
            .filter(|b| b.get("type").and_then(Value::as_str) == Some("text"))
            .filter_map(|b| b.get("text").and_then(Value::as_str))
            .collect::<Vec<_>>()
            .join(" "),
        _ => String::new(),
    }
}

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

    let mut prompt_tokens = 0;
    let mut cached_tokens = 0;
    if let Some(system) = obj.get("system") {
        let t = count_words(&plain_text(system)) + 1;
        prompt_tokens += t;
        cached_tokens += t;
    }
    let mut first_user_words = None;
    let mut last_user_raw = None;
    for m in messages {
        let role = m.get("role").and_then(Value::as_str).unwrap_or("");
        let content = m.get("content").unwrap_or(&Value::Null);
        prompt_tokens += count_words(&counted_text(content)) + 1;
        if role == "user" {
            let text = plain_text(content);
            if !text.is_empty() {
                first_user_words.get_or_insert(count_words(&text));
                last_user_raw = Some(text);
            }
        }
        if role == "assistant" {
            for b in content.as_array().into_iter().flatten() {
                if b.get("type").and_then(Value::as_str) == Some("thinking") {
                    let text = b.get("thinking").and_then(Value::as_str).unwrap_or("");
                    let sig = b.get("signature").and_then(Value::as_str).unwrap_or("");
                    if sig != signature(text) {
                        return Err(invalid("Invalid `signature` in `thinking` block"));
                    }
                }
            }
        }
    }
    let last_tool_result = messages.last().and_then(|m| {
        let blocks = m.get("content")?.as_array()?;
        let last = blocks
            .iter()
            .rev()
            .find(|b| b.get("type").and_then(Value::as_str) == Some("tool_result"))?;
        Some(tool_result_text(last))
    });
    let (last_user, directives) = extract_directives(&last_user_raw.unwrap_or_default());
    let thinking_type = obj
        .get("thinking")
        .and_then(|t| t.get("type"))
        .and_then(Value::as_str);
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
    let forced = (choice_type == Some("tool"))
        .then(|| choice.and_then(|c| c.get("name")).and_then(Value::as_str))
        .flatten();
    let (tool_name, tools) = choose_tools(names, choice_type == Some("none"), forced);
    let cache_write_tokens = first_user_words.unwrap_or(0);
    Ok(ChatRequest {
        model: obj
            .get("model")
            .and_then(Value::as_str)
            .unwrap_or("sim-claude")
            .to_owned(),
        stream: obj.get("stream").and_then(Value::as_bool).unwrap_or(false),
        include_usage: true,
        max_tokens: Some(max_tokens),
        thinking_disabled: thinking_type == Some("disabled"),
        thinking_enabled: matches!(thinking_type, Some("enabled" | "adaptive")),
        tool_name,
        tools,
        stop: obj
            .get("stop_sequences")
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(Value::as_str)
                    .map(str::to_owned)
                    .collect()
            })
            .unwrap_or_default(),
        prompt_tokens,
        cached_tokens,
        cache_write_tokens,
        last_user,
        last_tool_result,
        directives,
    })
}

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
        "input_tokens": u.prompt - u.cached - u.cache_write,
        "output_tokens": u.completion,
        "cache_creation_input_tokens": u.cache_write,
        "cache_read_input_tokens": u.cached,
    })
}

pub(super) fn render(req: &ChatRequest, plan: &Plan, n: u64) -> (Rendered, Value) {
    let id = format!("msg_sim_{n}");
    let reasoning = plan.reasoning.join(" ");
    let (reason, sequence) = stop_reason(&plan.finish);
    let usage = usage(plan);
    let mut blocks = Vec::new();
    if !plan.reasoning.is_empty() {
        blocks.push(
            json!({"type": "thinking", "thinking": reasoning, "signature": signature(&reasoning)}),
        );
    }
    match &plan.answer {
        Answer::Text(words) if !words.is_empty() => {
            blocks.push(json!({"type": "text", "text": words.join(" ")}))
        }
        Answer::Text(_) | Answer::Refused => {}
        Answer::Tools(calls) => {
            for c in calls {
                let input: Value = serde_json::from_str(&c.arguments).unwrap_or(json!({}));
                blocks.push(json!({"type": "tool_use", "id": format!("toolu_{}", c.hex),
                                   "name": c.name, "input": input}));
            }
        }
    }
    if !req.stream {
        let body = json!({
            "id": id, "type": "message", "role": "assistant", "model": req.model,
            "content": blocks, "stop_reason": reason, "stop_sequence": sequence, "usage": usage,
        });
        return (Rendered::Plain(body), usage);
    }
    let ev = |name: &str, data: Value| Out::named(name, data.to_string());
    let mut start_usage = usage.clone();
    start_usage["output_tokens"] = json!(1);
    let mut out = vec![
        ev(
            "message_start",
            json!({"type": "message_start", "message": {
            "id": id, "type": "message", "role": "assistant", "model": req.model, "content": [],
            "stop_reason": null, "stop_sequence": null, "usage": start_usage}}),
        ),
        ev("ping", json!({"type": "ping"})),
    ];
    for (index, block) in blocks.iter().enumerate() {
        let delta = |d: Value| {
            ev(
                "content_block_delta",
                json!({"type": "content_block_delta", "index": index, "delta": d}),
            )
        };
        let start = match block["type"].as_str() {
            Some("thinking") => json!({"type": "thinking", "thinking": "", "signature": ""}),
            Some("text") => json!({"type": "text", "text": ""}),
            _ => json!({"type": "tool_use", "id": block["id"], "name": block["name"], "input": {}}),
        };
        out.push(ev(
            "content_block_start",
            json!({"type": "content_block_start", "index": index, "content_block": start}),
        ));
        match block["type"].as_str() {
            Some("thinking") => {
                for w in spaced(&plan.reasoning) {
                    out.push(delta(json!({"type": "thinking_delta", "thinking": w})));
                }
                out.push(delta(
                    json!({"type": "signature_delta", "signature": block["signature"]}),
                ));
            }
            Some("text") => {
                if let Answer::Text(words) = &plan.answer {
                    for w in spaced(words) {
                        out.push(delta(json!({"type": "text_delta", "text": w})));
                    }
                }
            }
            _ => {
                let input = block["input"].to_string();
                for f in thirds(&input) {
                    out.push(delta(
                        json!({"type": "input_json_delta", "partial_json": f}),
                    ));
                }
            }
        }
        out.push(ev(
            "content_block_stop",
            json!({"type": "content_block_stop", "index": index}),
        ));
    }
    out.push(ev(
        "message_delta",
        json!({"type": "message_delta",
        "delta": {"stop_reason": reason, "stop_sequence": sequence},
        "usage": {"output_tokens": plan.usage.completion}}),
    ));
    out.push(ev("message_stop", json!({"type": "message_stop"})));
    (Rendered::Stream(out), usage)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::chat::plan::plan;

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
}
