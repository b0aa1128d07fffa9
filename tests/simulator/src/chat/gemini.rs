//! `POST /v1beta/models/{model}:generateContent` and
//! `:streamGenerateContent` (`?alt=sse`; without it a JSON array of the
//! chunks): the Gemini API, from the same plan as the OpenAI answers (see
//! the module `chat`). What differs:
//!
//! - **Keys** are read in camelCase or snake_case at every level, as the
//!   google-genai SDK mixes them.
//! - **Tokens.** `systemInstruction` counts as one turn; a turn's text is
//!   its non-thought text parts and its function responses' text (a
//!   response object with one string member is that string, any other its
//!   compact JSON); each turn is words + 1. `cachedContentTokenCount` = the
//!   system turn's tokens, inside `promptTokenCount`.
//! - **Thinking** when the model name contains `reason`,
//!   `thinkingConfig.includeThoughts` is true or `thinkingBudget` > 0,
//!   unless `thinkingBudget` is 0. The thought is one part
//!   `{"text": ..., "thought": true}` (one per word in streams); the first
//!   part after it carries `thoughtSignature`, standard base64 of
//!   `sim-gsig:<16 hex digits of fnv1a(the thought text)>`. A
//!   `thoughtSignature` sent back on a `model` part must be exactly that.
//! - **Tools.** `tools[].functionDeclarations[].name`;
//!   `toolConfig.functionCallingConfig.mode` `NONE`, or `ANY` with one
//!   allowed name (forced). Function calls carry no id.
//! - **Answer.** `finishReason` `STOP` (also for calls and stop sequences),
//!   `MAX_TOKENS`, `SAFETY` (no content), or a `[[sim:finish=...]]` word;
//!   `usageMetadata` with `candidatesTokenCount` excluding thoughts and
//!   `thoughtsTokenCount`; `responseId` `sim-<n>`; `modelVersion` the model.
//! - **Streams**: `data:` lines only (no `event:`, comments or `[DONE]`),
//!   one chunk per thought word, content word or call; the last chunk has
//!   the finish reason and the usage.

use std::sync::Arc;

use axum::extract::{Path, Query, State};
use axum::response::{IntoResponse, Response};
use axum::Json;
use base64::Engine as _;
use bytes::Bytes;
use serde_json::{json, Map, Value};

use super::plan::{Answer, Finish, Plan};
use super::render::spaced;
use super::request::{choose_tools, ChatRequest};
use super::{respond, Rendered};
use crate::errors::{ApiError, Dialect};
use crate::faults::extract_directives;
use crate::sse::Out;
use crate::tokens::{count_words, fnv1a, REASONING};
use crate::SimState;

/// The thought signature: the same for every thought of the simulator.
pub fn signature() -> String {
    base64::engine::general_purpose::STANDARD
        .encode(format!("sim-gsig:{:016x}", fnv1a(&REASONING.join(" "))))
}

fn invalid(msg: &str) -> ApiError {
    ApiError::invalid_request(msg, None).in_dialect(Dialect::Gemini)
}

/// `key` (camelCase) or its snake_case spelling.
fn key<'a>(v: &'a Value, camel: &str) -> Option<&'a Value> {
    let o = v.as_object()?;
    if let Some(x) = o.get(camel) {
        return Some(x);
    }
    let mut snake = String::new();
    for c in camel.chars() {
        if c.is_ascii_uppercase() {
            snake.push('_');
            snake.push(c.to_ascii_lowercase());
        } else {
            snake.push(c);
        }
    }
    o.get(&snake)
}

pub async fn generate(
    State(state): State<Arc<SimState>>,
    Path(model_action): Path<String>,
    Query(query): Query<std::collections::HashMap<String, String>>,
    body: Bytes,
) -> Response {
    let Some((model, action)) = model_action.split_once(':') else {
        return ApiError::not_found(&model_action)
            .in_dialect(Dialect::Gemini)
            .into_response();
    };
    let stream = match action {
        "generateContent" => false,
        "streamGenerateContent" => true,
        _ => {
            return ApiError::not_found(action)
                .in_dialect(Dialect::Gemini)
                .into_response()
        }
    };
    let mut req = match parse(&body, model, stream) {
        Ok(r) => r,
        Err(e) => return e.into_response(),
    };
    if stream && query.get("alt").map(String::as_str) != Some("sse") {
        // Gemini's non-SSE stream is one JSON array of the chunks.
        req.stream = true;
        let resp = respond(&state, req, Dialect::Gemini).await;
        let usage = resp
            .extensions()
            .get::<crate::record::ReportedUsage>()
            .cloned();
        let bytes = axum::body::to_bytes(resp.into_body(), 1 << 24)
            .await
            .unwrap_or_default();
        let chunks: Vec<Value> = String::from_utf8_lossy(&bytes)
            .split("\n\n")
            .filter_map(|e| e.strip_prefix("data: "))
            .filter_map(|d| serde_json::from_str(d).ok())
            .collect();
        let mut out = Json(chunks).into_response();
        if let Some(u) = usage {
            out.extensions_mut().insert(u);
        }
        return out;
    }
    respond(&state, req, Dialect::Gemini).await
}

/// A function response's text: its one string member, or its compact JSON.
fn response_text(r: &Value) -> String {
    if let Some(o) = r.as_object() {
        if o.len() == 1 {
            if let Some(Value::String(s)) = o.values().next() {
                return s.clone();
            }
        }
    }
    r.to_string()
}

fn parts(content: &Value) -> &[Value] {
    key(content, "parts")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or(&[])
}

/// The text of a turn that counts: non-thought text and function responses.
fn counted_text(content: &Value) -> String {
    parts(content)
        .iter()
        .filter_map(|p| {
            if key(p, "thought").and_then(Value::as_bool) == Some(true) {
                return None;
            }
            if let Some(r) = key(p, "functionResponse") {
                return Some(response_text(key(r, "response").unwrap_or(&Value::Null)));
            }
            key(p, "text").and_then(Value::as_str).map(str::to_owned)
        })
        .collect::<Vec<_>>()
        .join(" ")
}

pub fn parse(body: &[u8], model: &str, stream: bool) -> Result<ChatRequest, ApiError> {
    let value: Value = serde_json::from_slice(body)
        .map_err(|e| invalid(&format!("Invalid JSON payload received. {e}")))?;
    let contents = key(&value, "contents")
        .and_then(Value::as_array)
        .ok_or_else(|| invalid("* GenerateContentRequest.contents: contents is not specified"))?;
    let mut prompt_tokens = 0;
    let mut cached_tokens = 0;
    if let Some(system) = key(&value, "systemInstruction") {
        let text = match system {
            Value::String(s) => s.clone(),
            other => counted_text(other),
        };
        let t = count_words(&text) + 1;
        prompt_tokens += t;
        cached_tokens += t;
    }
    let mut last_user_raw = None;
    for c in contents {
        prompt_tokens += count_words(&counted_text(c)) + 1;
        let role = key(c, "role").and_then(Value::as_str).unwrap_or("user");
        if role == "model" {
            for p in parts(c) {
                if let Some(sig) = key(p, "thoughtSignature").and_then(Value::as_str) {
                    if sig != signature() {
                        return Err(invalid("Invalid thought signature"));
                    }
                }
            }
        } else {
            let text: Vec<&str> = parts(c)
                .iter()
                .filter(|p| key(p, "functionResponse").is_none())
                .filter_map(|p| key(p, "text").and_then(Value::as_str))
                .collect();
            if !text.is_empty() {
                last_user_raw = Some(text.join(" "));
            }
        }
    }
    let last_tool_result = contents.last().and_then(|c| {
        parts(c)
            .iter()
            .rev()
            .find_map(|p| key(p, "functionResponse"))
            .map(|r| response_text(key(r, "response").unwrap_or(&Value::Null)))
    });
    let (last_user, directives) = extract_directives(&last_user_raw.unwrap_or_default());
    let config = key(&value, "generationConfig")
        .cloned()
        .unwrap_or(Value::Null);
    let thinking = key(&config, "thinkingConfig")
        .cloned()
        .unwrap_or(Value::Null);
    let budget = key(&thinking, "thinkingBudget").and_then(Value::as_i64);
    let include = key(&thinking, "includeThoughts").and_then(Value::as_bool);
    let names: Vec<String> = key(&value, "tools")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|t| key(t, "functionDeclarations").and_then(Value::as_array))
        .flatten()
        .filter_map(|d| key(d, "name").and_then(Value::as_str).map(str::to_owned))
        .collect();
    let calling = key(&value, "toolConfig")
        .and_then(|t| key(t, "functionCallingConfig"))
        .cloned()
        .unwrap_or(Value::Null);
    let mode = key(&calling, "mode").and_then(Value::as_str);
    let allowed: Vec<&str> = key(&calling, "allowedFunctionNames")
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let forced = (mode == Some("ANY") && allowed.len() == 1).then(|| allowed[0]);
    let (tool_name, tools) = choose_tools(names, mode == Some("NONE"), forced);
    Ok(ChatRequest {
        model: model.to_owned(),
        stream,
        include_usage: true,
        max_tokens: key(&config, "maxOutputTokens").and_then(Value::as_u64),
        thinking_disabled: budget == Some(0),
        thinking_enabled: include == Some(true) || budget.is_some_and(|b| b > 0),
        tool_name,
        tools,
        stop: key(&config, "stopSequences")
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
        cache_write_tokens: 0,
        last_user,
        last_tool_result,
        directives,
    })
}

fn finish_word(f: &Finish) -> String {
    match f {
        Finish::Stop | Finish::Tools | Finish::StopSequence(_) => "STOP".into(),
        Finish::Length => "MAX_TOKENS".into(),
        Finish::Refused => "SAFETY".into(),
        Finish::Raw(r) => r.clone(),
    }
}

fn usage(plan: &Plan) -> Value {
    let u = &plan.usage;
    let mut m = Map::new();
    m.insert("promptTokenCount".into(), json!(u.prompt));
    m.insert(
        "candidatesTokenCount".into(),
        json!(u.completion - u.reasoning),
    );
    m.insert("totalTokenCount".into(), json!(u.prompt + u.completion));
    if u.cached > 0 {
        m.insert("cachedContentTokenCount".into(), json!(u.cached));
    }
    if u.reasoning > 0 {
        m.insert("thoughtsTokenCount".into(), json!(u.reasoning));
    }
    Value::Object(m)
}

/// The answer's non-thought parts, the signature on the first.
fn answer_parts(plan: &Plan) -> Vec<Value> {
    let mut parts = match &plan.answer {
        Answer::Text(words) => vec![json!({"text": words.join(" ")})],
        Answer::Refused => Vec::new(),
        Answer::Tools(calls) => calls
            .iter()
            .map(|c| {
                let args: Value = serde_json::from_str(&c.arguments).unwrap_or(json!({}));
                json!({"functionCall": {"name": c.name, "args": args}})
            })
            .collect(),
    };
    if !plan.reasoning.is_empty() {
        if let Some(first) = parts.first_mut() {
            first["thoughtSignature"] = json!(signature());
        }
    }
    parts
}

pub(super) fn render(req: &ChatRequest, plan: &Plan, n: u64) -> (Rendered, Value) {
    let usage = usage(plan);
    let meta = |mut v: Value| {
        v["modelVersion"] = json!(req.model);
        v["responseId"] = json!(format!("sim-{n}"));
        v
    };
    let finish = finish_word(&plan.finish);
    if !req.stream {
        let mut parts = Vec::new();
        if !plan.reasoning.is_empty() {
            parts.push(json!({"text": plan.reasoning.join(" "), "thought": true}));
        }
        parts.extend(answer_parts(plan));
        let mut candidate = json!({"finishReason": finish, "index": 0});
        if plan.answer != Answer::Refused {
            candidate["content"] = json!({"role": "model", "parts": parts});
        }
        let body = meta(json!({"candidates": [candidate], "usageMetadata": usage}));
        return (Rendered::Plain(body), usage);
    }
    let chunk = |parts: Vec<Value>| {
        Out::data(
            meta(
                json!({"candidates": [{"content": {"role": "model", "parts": parts}, "index": 0}]}),
            )
            .to_string(),
        )
    };
    let mut out: Vec<Out> = spaced(&plan.reasoning)
        .map(|w| chunk(vec![json!({"text": w, "thought": true})]))
        .collect();
    let answer = answer_parts(plan);
    match &plan.answer {
        Answer::Text(words) => {
            let sig = answer
                .first()
                .and_then(|p| p.get("thoughtSignature"))
                .cloned();
            for (i, w) in spaced(words).enumerate() {
                let mut part = json!({"text": w});
                if let (0, Some(s)) = (i, &sig) {
                    part["thoughtSignature"] = s.clone();
                }
                out.push(chunk(vec![part]));
            }
        }
        Answer::Tools(_) => {
            for p in answer {
                out.push(chunk(vec![p]));
            }
        }
        Answer::Refused => {}
    }
    let mut last =
        json!({"candidates": [{"finishReason": finish, "index": 0}], "usageMetadata": usage});
    if plan.answer != Answer::Refused {
        last["candidates"][0]["content"] = json!({"role": "model", "parts": [{"text": ""}]});
    }
    out.push(Out::data(meta(last).to_string()));
    (Rendered::Stream(out), usage)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::chat::plan::plan;

    fn req(v: Value) -> ChatRequest {
        match parse(v.to_string().as_bytes(), "sim-gemini", false) {
            Ok(r) => r,
            Err(e) => panic!("{e:?}"),
        }
    }

    #[test]
    fn tokens_cache_and_snake_case_thinking() {
        let r = req(
            json!({"systemInstruction": {"parts": [{"text": "be brief"}]},
            "contents": [{"role": "user", "parts": [{"text": "one two"}]},
                         {"role": "model", "parts": [{"text": "x", "thought": true}, {"functionCall": {"name": "f", "args": {}}}]},
                         {"role": "user", "parts": [{"functionResponse": {"name": "f", "response": {"result": "a b c"}}}]}],
            "generationConfig": {"thinking_config": {"include_thoughts": true}}}),
        );
        assert_eq!(r.prompt_tokens, 3 + 3 + 1 + 4);
        assert_eq!(r.cached_tokens, 3);
        assert_eq!(r.last_tool_result.as_deref(), Some("a b c"));
        assert!(r.thinking_enabled);
        let off = req(
            json!({"contents": [], "generation_config": {"thinking_config": {"thinking_budget": 0}}}),
        );
        assert!(off.thinking_disabled);
    }

    #[test]
    fn thoughts_then_signed_answer() {
        let r = req(json!({"contents": [{"parts": [{"text": "hi"}]}],
            "generationConfig": {"thinkingConfig": {"thinkingBudget": 512}}}));
        let p = plan(&r);
        let (Rendered::Plain(body), usage) = render(&r, &p, 1) else {
            panic!()
        };
        let parts = &body["candidates"][0]["content"]["parts"];
        assert_eq!(parts[0]["thought"], true);
        assert_eq!(parts[1]["thoughtSignature"], signature());
        assert_eq!(usage["thoughtsTokenCount"], 8);
        let bad = json!({"contents": [{"role": "model", "parts": [{"text": "x", "thoughtSignature": "QUFB"}]}]});
        assert!(parse(bad.to_string().as_bytes(), "m", false).is_err());
    }
}
