//! `POST /v1beta/models/{model}:generateContent` and
//! `POST /v1beta/models/{model}:streamGenerateContent`: the Gemini API,
//! from the shared plan (the rules are in the module `chat`). What is its
//! own:
//!
//! - **Auth.** `x-goog-api-key: <key>` or `?key=<key>` (checked by the auth
//!   layer).
//! - **Route.** The last path segment is `{model}:{action}`; the model comes
//!   from the URL. `streamGenerateContent?alt=sse` streams SSE; without
//!   `alt=sse` the same chunks come as one JSON array. Any other action is
//!   404.
//! - **Keys** are read in camelCase or snake_case at every level
//!   (`generationConfig.thinking_config.thinking_budget`,
//!   `function_declarations`, ...), as the google-genai SDK mixes them.
//! - **Turns.** `systemInstruction` (`{parts: [{text}]}`, or a string) is one
//!   system turn. `contents[]` with role `model` are the assistant's, any
//!   other role the user's. A turn's text is its text parts that are not
//!   thoughts (`thought: true`); each `functionResponse` part is a tool
//!   result whose text is its `response` — the member's value when
//!   `response` is an object with exactly one member and that member is a
//!   string (`{"result": "noon exactly"}` → `noon exactly`), else the
//!   canonical compact JSON of `response` (keys sorted). `functionCall`,
//!   `inlineData` and `fileData` parts add no words. The conversation ends
//!   with a tool result when the last content has a `functionResponse` part
//!   (the last one is the subject).
//! - **Options.** `generationConfig.maxOutputTokens`, `.stopSequences`,
//!   `.thinkingConfig.includeThoughts` / `.thinkingBudget` (> 0 enables
//!   thinking, 0 disables it).
//! - **Tools.** `tools[].functionDeclarations[].name`, in order;
//!   `toolConfig.functionCallingConfig.mode` `NONE` forbids calls; with
//!   `ANY`, `allowedFunctionNames` keeps only those tools (one left: forced).
//!   Function calls carry no id.
//! - **Thought signatures.** When thinking, the answer's parts are one thought
//!   part `{"text": <reasoning>, "thought": true}` first, then the answer
//!   parts; the first non-thought part (text or `functionCall`) carries
//!   `thoughtSignature` = standard padded base64 of `sim-gsig:<16 hex digits
//!   of fnv1a("Let me think about this step by step.")>` ([`signature`]).
//!   Any `thoughtSignature` sent back on a `model` part must be exactly that,
//!   else 400 `INVALID_ARGUMENT` `Invalid thought signature`.
//! - **Answer.** `{"candidates": [{"content": {"role": "model", "parts":
//!   [...]}, "finishReason", "index": 0}], "usageMetadata", "modelVersion":
//!   <model>, "responseId": "sim-<n>"}`. A text answer is one part
//!   `{"text": <content>}` (also when empty); a tool answer one
//!   `{"functionCall": {"name", "args": {...}}}` part per call. `content`
//!   is left out when there are no parts (a refusal without thinking).
//! - **Usage.** `promptTokenCount` (cache included), `candidatesTokenCount`
//!   (output without thoughts), `totalTokenCount` = prompt + candidates +
//!   thoughts, `cachedContentTokenCount` and `thoughtsTokenCount` only when
//!   > 0.
//! - **Streams.** `data: <json>` and a blank line per chunk; no `event:`
//!   lines, no comments (even with `[[sim:comments]]`), no `[DONE]`. One
//!   chunk per thought word (`{"text": "<word> ", "thought": true}`), per
//!   content word (the first with the signature, when thinking; a thinking
//!   answer without words still sends one empty signed text part), per
//!   function call (whole); then the finish marker: a last chunk whose
//!   candidate has `finishReason` (and no content) and which carries
//!   `usageMetadata`. Every chunk has `modelVersion` and `responseId`.

use std::sync::Arc;

use axum::extract::{Path, RawQuery, State};
use axum::response::{IntoResponse, Response};
use base64::Engine as _;
use bytes::Bytes;
use serde_json::{json, Map, Value};

use super::deltas::spaced;
use super::plan::{Answer, Finish, Plan};
use super::request::{canonical_json, choose_tools, strings, ChatRequest, Role, Turn};
use super::{respond, Rendered, Wire};
use crate::errors::{ApiError, Dialect};
use crate::sse::Out;
use crate::tokens::{fnv1a, REASONING};
use crate::SimState;

/// The thought signature: the same for every thought of the simulator,
/// standard base64 of `sim-gsig:<16 hex digits of fnv1a(REASONING)>`.
pub fn signature() -> String {
    base64::engine::general_purpose::STANDARD
        .encode(format!("sim-gsig:{:016x}", fnv1a(&REASONING.join(" "))))
}

fn invalid(msg: &str) -> ApiError {
    ApiError::invalid_request(msg, None).in_dialect(Dialect::Gemini)
}

/// `camel` of an object, or its snake_case spelling; null counts as absent.
pub(crate) fn key<'a>(v: &'a Value, camel: &str) -> Option<&'a Value> {
    let o = v.as_object()?;
    if let Some(x) = o.get(camel).filter(|x| !x.is_null()) {
        return Some(x);
    }
    o.get(&snake_case(camel)).filter(|x| !x.is_null())
}

fn snake_case(camel: &str) -> String {
    let mut snake = String::with_capacity(camel.len() + 4);
    for c in camel.chars() {
        if c.is_ascii_uppercase() {
            snake.push('_');
            snake.push(c.to_ascii_lowercase());
        } else {
            snake.push(c);
        }
    }
    snake
}

pub async fn generate(
    State(state): State<Arc<SimState>>,
    Path(model_action): Path<String>,
    RawQuery(query): RawQuery,
    body: Bytes,
) -> Response {
    let not_found = || {
        ApiError::not_found(&format!("/v1beta/models/{model_action}"))
            .in_dialect(Dialect::Gemini)
            .into_response()
    };
    let Some((model, action)) = model_action.rsplit_once(':') else {
        return not_found();
    };
    let stream = match action {
        "generateContent" => false,
        "streamGenerateContent" => true,
        _ => return not_found(),
    };
    let sse = query
        .as_deref()
        .unwrap_or("")
        .split('&')
        .any(|kv| kv == "alt=sse");
    match parse(&body, model, stream) {
        Ok(req) => respond(&state, req, Wire::Gemini { sse }).await,
        Err(e) => e.into_response(),
    }
}

/// A function response's text: the value of its only member when that is
/// a string, else its canonical compact JSON.
fn response_text(response: &Value) -> String {
    if let Some(o) = response.as_object() {
        if let (1, Some(Value::String(s))) = (o.len(), o.values().next()) {
            return s.clone();
        }
    }
    canonical_json(response)
}

fn parts(content: &Value) -> &[Value] {
    key(content, "parts")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or(&[])
}

/// A content as a turn.
fn turn(role: Role, content: &Value) -> Turn {
    if let Value::String(s) = content {
        return Turn::new(role, s.clone());
    }
    let parts = parts(content);
    Turn {
        role,
        text: parts
            .iter()
            .filter(|p| key(p, "thought").and_then(Value::as_bool) != Some(true))
            .filter_map(|p| key(p, "text").and_then(Value::as_str))
            .collect::<Vec<_>>()
            .join(" "),
        tool_results: parts
            .iter()
            .filter_map(|p| key(p, "functionResponse"))
            .map(|r| response_text(key(r, "response").unwrap_or(&Value::Null)))
            .collect(),
    }
}

/// Reads a generateContent body; the model and streaming come from the URL.
pub fn parse(body: &[u8], model: &str, stream: bool) -> Result<ChatRequest, ApiError> {
    let value: Value = serde_json::from_slice(body)
        .map_err(|e| invalid(&format!("Invalid JSON payload received. {e}")))?;
    let contents = key(&value, "contents")
        .and_then(Value::as_array)
        .ok_or_else(|| invalid("* GenerateContentRequest.contents: contents is not specified"))?;
    let mut turns = Vec::with_capacity(contents.len() + 1);
    if let Some(system) = key(&value, "systemInstruction") {
        turns.push(turn(Role::System, system));
    }
    for c in contents {
        let role = match key(c, "role").and_then(Value::as_str) {
            Some("model") => Role::Assistant,
            _ => Role::User,
        };
        if role == Role::Assistant {
            let expected = signature();
            let bad = parts(c)
                .iter()
                .filter_map(|p| key(p, "thoughtSignature"))
                .any(|sig| sig.as_str() != Some(expected.as_str()));
            if bad {
                return Err(invalid("Invalid thought signature"));
            }
        }
        turns.push(turn(role, c));
    }
    let mut req = ChatRequest::from_turns(model, &turns);
    req.stream = stream;
    req.include_usage = true;
    let none = Value::Null;
    let config = key(&value, "generationConfig").unwrap_or(&none);
    req.max_tokens = key(config, "maxOutputTokens").and_then(Value::as_u64);
    req.stop = strings(key(config, "stopSequences"));
    let thinking = key(config, "thinkingConfig").unwrap_or(&none);
    let budget = key(thinking, "thinkingBudget").and_then(Value::as_i64);
    let include = key(thinking, "includeThoughts").and_then(Value::as_bool);
    req.thinking_disabled = budget == Some(0);
    req.thinking_enabled = include == Some(true) || budget.is_some_and(|b| b > 0);

    let mut names: Vec<String> = key(&value, "tools")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|t| key(t, "functionDeclarations").and_then(Value::as_array))
        .flatten()
        .filter_map(|d| key(d, "name").and_then(Value::as_str).map(str::to_owned))
        .collect();
    let calling = key(&value, "toolConfig")
        .and_then(|t| key(t, "functionCallingConfig"))
        .unwrap_or(&none);
    let mode = key(calling, "mode").and_then(Value::as_str);
    let allowed = strings(key(calling, "allowedFunctionNames"));
    if mode == Some("ANY") && !allowed.is_empty() {
        names.retain(|n| allowed.contains(n));
    }
    let forced =
        (mode == Some("ANY") && allowed.len() == 1 && names.len() == 1).then(|| names[0].clone());
    (req.tool_name, req.tools) = choose_tools(names, mode == Some("NONE"), forced.as_deref());
    Ok(req)
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

/// The answer's non-thought parts as whole parts (the text in one).
fn answer_parts(plan: &Plan) -> Vec<Value> {
    match &plan.answer {
        Answer::Text(words) => vec![json!({"text": words.join(" ")})],
        Answer::Refused => Vec::new(),
        Answer::Tools(calls) => calls
            .iter()
            .map(|c| {
                let args: Value = serde_json::from_str(&c.arguments).unwrap_or_else(|_| json!({}));
                json!({"functionCall": {"name": c.name, "args": args}})
            })
            .collect(),
    }
}

/// The answer parts of a stream, one per chunk: a part per word, or per call.
fn streamed_answer_parts(plan: &Plan) -> Vec<Value> {
    match &plan.answer {
        Answer::Text(words) if words.is_empty() && !plan.reasoning.is_empty() => {
            // Somewhere to carry the signature.
            vec![json!({"text": ""})]
        }
        Answer::Text(words) => spaced(words).map(|w| json!({"text": w})).collect(),
        _ => answer_parts(plan),
    }
}

/// Signs the first non-thought part, when thinking.
fn sign(plan: &Plan, parts: &mut [Value]) {
    if plan.reasoning.is_empty() {
        return;
    }
    if let Some(first) = parts.first_mut() {
        first["thoughtSignature"] = json!(signature());
    }
}

/// The answer and its `usageMetadata`.
pub(super) fn render(req: &ChatRequest, plan: &Plan, n: u64) -> (Rendered, Option<Value>) {
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
        let mut answer = answer_parts(plan);
        sign(plan, &mut answer);
        parts.extend(answer);
        let mut candidate = json!({"finishReason": finish, "index": 0});
        if !parts.is_empty() {
            candidate["content"] = json!({"role": "model", "parts": parts});
        }
        let body = meta(json!({"candidates": [candidate], "usageMetadata": usage}));
        return (Rendered::Plain(body), Some(usage));
    }
    let chunk = |part: Value| {
        Out::data(
            meta(json!({"candidates": [{"content": {"role": "model", "parts": [part]}, "index": 0}]}))
                .to_string(),
        )
    };
    let mut events: Vec<Out> = spaced(&plan.reasoning)
        .map(|w| chunk(json!({"text": w, "thought": true})))
        .collect();
    let mut answer = streamed_answer_parts(plan);
    sign(plan, &mut answer);
    events.extend(answer.into_iter().map(chunk));
    let finish_at = events.len();
    events.push(Out::data(
        meta(json!({"candidates": [{"finishReason": finish, "index": 0}], "usageMetadata": usage}))
            .to_string(),
    ));
    (Rendered::Stream { events, finish_at }, Some(usage))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::chat::plan::plan;
    use crate::tokens::reply_words;

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
        let (Rendered::Plain(body), Some(usage)) = render(&r, &p, 1) else {
            panic!()
        };
        let parts = &body["candidates"][0]["content"]["parts"];
        assert_eq!(parts[0]["thought"], true);
        assert_eq!(parts[1]["thoughtSignature"], signature());
        assert_eq!(usage["thoughtsTokenCount"], 8);
        let bad = json!({"contents": [{"role": "model", "parts": [{"text": "x", "thoughtSignature": "QUFB"}]}]});
        assert!(parse(bad.to_string().as_bytes(), "m", false).is_err());
    }

    #[test]
    fn every_thinking_spelling() {
        let with =
            |config: Value| req(json!({"contents": [], "generationConfig": config})).thinks();
        assert!(with(json!({"thinkingConfig": {"includeThoughts": true}})));
        assert!(with(json!({"thinkingConfig": {"include_thoughts": true}})));
        assert!(with(json!({"thinking_config": {"thinkingBudget": 1}})));
        assert!(
            !with(json!({"thinkingConfig": {"thinkingBudget": -1}})),
            "dynamic is not a request"
        );
        assert!(!with(
            json!({"thinkingConfig": {"includeThoughts": true, "thinking_budget": 0}})
        ));
        assert!(!with(json!({})));
        let reasoner = parse(br#"{"contents": []}"#, "gemini-reasoner", false);
        assert!(reasoner.is_ok_and(|r| r.thinks()));
        let off = parse(
            br#"{"contents": [], "generation_config": {"thinking_config": {"thinking_budget": 0}}}"#,
            "gemini-reasoner",
            false,
        );
        assert!(off.is_ok_and(|r| !r.thinks()));
    }

    #[test]
    fn the_signature_formula_and_where_it_is_checked() {
        let decoded = base64::engine::general_purpose::STANDARD
            .decode(signature())
            .unwrap_or_default();
        assert_eq!(
            String::from_utf8_lossy(&decoded),
            format!(
                "sim-gsig:{:016x}",
                fnv1a("Let me think about this step by step.")
            )
        );
        let body = |sig: &str| {
            json!({"contents": [
                {"role": "user", "parts": [{"text": "a"}]},
                {"role": "model", "parts": [{"text": "t", "thought": true, "thought_signature": sig},
                                             {"functionCall": {"name": "f", "args": {}}, "thoughtSignature": sig}]},
                {"role": "user", "parts": [{"thoughtSignature": "anything", "text": "b"}]}]})
            .to_string()
        };
        assert!(parse(body(&signature()).as_bytes(), "m", false).is_ok());
        let e = parse(body("QUFB").as_bytes(), "m", false)
            .err()
            .map(|e| e.body());
        assert_eq!(
            e,
            Some(
                json!({"error": {"code": 400, "message": "Invalid thought signature",
                                  "status": "INVALID_ARGUMENT"}})
            )
        );
    }

    #[test]
    fn turns_parts_and_function_responses() {
        let r = req(
            json!({"system_instruction": {"parts": [{"text": "a"}, {"text": "b c"}]},
            "contents": [
                {"role": "user", "parts": [{"text": "look"}, {"inline_data": {"mime_type": "image/png", "data": "eA=="}},
                                           {"fileData": {"fileUri": "gs://x y"}}]},
                {"role": "model", "parts": [{"functionCall": {"name": "f", "args": {"q": "x y z"}}}]},
                {"role": "user", "parts": [
                    {"functionResponse": {"name": "f", "response": {"temp": 20, "sky": "clear blue"}}},
                    {"function_response": {"name": "g", "response": {"output": "noon exactly"}}}]}]}),
        );
        // system (3+1), user (1+1), model (0+1),
        // results `{"sky":"clear blue","temp":20}` (2) + `noon exactly` (2), +1
        assert_eq!(r.prompt_tokens, 4 + 2 + 1 + 5);
        assert_eq!(r.cached_tokens, 4);
        assert_eq!(r.last_user, "look");
        assert_eq!(r.last_tool_result.as_deref(), Some("noon exactly"));
        assert_eq!(
            response_text(&json!({"temp": 20, "sky": "clear blue"})),
            r#"{"sky":"clear blue","temp":20}"#
        );
        assert_eq!(response_text(&json!({"n": 1})), r#"{"n":1}"#);
        assert_eq!(response_text(&json!("bare")), r#""bare""#);
    }

    #[test]
    fn tool_config_modes() {
        let body = |config: Value| {
            json!({"contents": [{"parts": [{"text": "q"}]}],
                   "tools": [{"functionDeclarations": [{"name": "a"}, {"name": "b", "parameters_json_schema": {}}]},
                             {"function_declarations": [{"name": "c"}]}],
                   "toolConfig": {"functionCallingConfig": config}})
        };
        let r = req(body(json!({"mode": "AUTO"})));
        assert_eq!((r.tool_name.as_deref(), r.tools.len()), (Some("a"), 3));
        assert_eq!(req(body(json!({"mode": "NONE"}))).tool_name, None);
        let r = req(body(
            json!({"mode": "ANY", "allowed_function_names": ["c"]}),
        ));
        assert_eq!((r.tool_name.as_deref(), r.tools.len()), (Some("c"), 1));
        let r = req(body(
            json!({"mode": "ANY", "allowedFunctionNames": ["c", "b"]}),
        ));
        assert_eq!(r.tools, ["b", "c"], "declaration order");
    }

    fn plain(body: Value) -> Value {
        let r = req(body);
        match render(&r, &plan(&r), 4) {
            (Rendered::Plain(v), Some(u)) => {
                assert_eq!(v["usageMetadata"], u);
                v
            }
            _ => panic!("expected a plain answer"),
        }
    }

    #[test]
    fn plain_answers() {
        let v = plain(
            json!({"systemInstruction": {"parts": [{"text": "be brief"}]},
            "contents": [{"parts": [{"text": "hello"}]}]}),
        );
        assert_eq!(
            (v["responseId"].as_str(), v["modelVersion"].as_str()),
            (Some("sim-4"), Some("sim-gemini"))
        );
        let c = &v["candidates"][0];
        assert_eq!(
            c["content"],
            json!({"role": "model", "parts": [{"text": reply_words("hello").join(" ")}]})
        );
        assert_eq!(
            (c["finishReason"].as_str(), c["index"].as_u64()),
            (Some("STOP"), Some(0))
        );
        let n = reply_words("hello").len() as u64;
        assert_eq!(
            v["usageMetadata"],
            json!({"promptTokenCount": 3 + 2, "candidatesTokenCount": n,
                   "totalTokenCount": 5 + n, "cachedContentTokenCount": 3})
        );

        let v = plain(json!({"contents": [{"parts": [{"text": "hello"}]}],
                             "generationConfig": {"stopSequences": ["reply"]}}));
        assert_eq!(
            v["candidates"][0]["content"]["parts"],
            json!([{"text": "Simulated"}])
        );
        assert_eq!(v["candidates"][0]["finishReason"], "STOP");

        let v = plain(json!({"contents": [{"parts": [{"text": "hello"}]}],
                             "generationConfig": {"max_output_tokens": 2}}));
        assert_eq!(v["candidates"][0]["finishReason"], "MAX_TOKENS");
        assert_eq!(v["usageMetadata"]["candidatesTokenCount"], 2);

        let v = plain(json!({"contents": [{"parts": [{"text": "x [[sim:refuse]]"}]}]}));
        assert_eq!(
            v["candidates"][0],
            json!({"finishReason": "SAFETY", "index": 0})
        );
        assert_eq!(v["usageMetadata"]["candidatesTokenCount"], 0);

        let v = plain(
            json!({"contents": [{"parts": [{"text": "x [[sim:finish=MALFORMED_FUNCTION_CALL]]"}]}]}),
        );
        assert_eq!(
            v["candidates"][0]["finishReason"],
            "MALFORMED_FUNCTION_CALL"
        );
    }

    #[test]
    fn parallel_function_calls_without_ids_then_the_reply_to_their_results() {
        let tools = json!([{"functionDeclarations": [{"name": "a"}, {"name": "b"}]}]);
        let v = plain(
            json!({"tools": tools, "generationConfig": {"thinkingConfig": {"includeThoughts": true}},
            "contents": [{"parts": [{"text": "q [[sim:parallel]]"}]}]}),
        );
        let parts = &v["candidates"][0]["content"]["parts"];
        assert_eq!(parts[0]["thought"], true);
        assert_eq!(
            parts[1],
            json!({"functionCall": {"name": "a", "args": {"query": "q"}}, "thoughtSignature": signature()})
        );
        assert_eq!(
            parts[2],
            json!({"functionCall": {"name": "b", "args": {"query": "q", "index": 1}}})
        );
        assert_eq!(v["candidates"][0]["finishReason"], "STOP");
        let v = plain(json!({"tools": tools, "contents": [
            {"parts": [{"text": "q"}]},
            {"role": "model", "parts": [{"functionCall": {"name": "a", "args": {}}}]},
            {"role": "user", "parts": [{"functionResponse": {"name": "a", "response": {"result": "noon exactly"}}}]}]}));
        assert_eq!(
            v["candidates"][0]["content"]["parts"][0]["text"],
            reply_words("noon exactly").join(" ")
        );
    }

    fn stream(body: Value) -> (Vec<Value>, usize) {
        let r = match parse(body.to_string().as_bytes(), "sim-gemini", true) {
            Ok(r) => r,
            Err(e) => panic!("{e:?}"),
        };
        let (Rendered::Stream { events, finish_at }, Some(_)) = render(&r, &plan(&r), 2) else {
            panic!("expected a stream")
        };
        assert!(events.iter().all(|e| e.event.is_none()));
        let values = events
            .iter()
            .map(|e| serde_json::from_str(&e.data).unwrap_or(Value::Null))
            .collect();
        (values, finish_at)
    }

    #[test]
    fn stream_chunks() {
        let (chunks, finish_at) = stream(json!({"contents": [{"parts": [{"text": "hello"}]}],
            "generationConfig": {"thinkingConfig": {"includeThoughts": true}, "maxOutputTokens": 10}}));
        assert_eq!(chunks.len(), 8 + 2 + 1);
        assert_eq!(finish_at, 10);
        assert!(chunks
            .iter()
            .all(|c| c["responseId"] == "sim-2" && c["modelVersion"] == "sim-gemini"));
        let part = |i: usize| chunks[i]["candidates"][0]["content"]["parts"][0].clone();
        assert_eq!(part(0), json!({"text": "Let ", "thought": true}));
        assert_eq!(
            part(8),
            json!({"text": "Simulated ", "thoughtSignature": signature()})
        );
        assert_eq!(part(9), json!({"text": "reply"}));
        assert!(chunks[..10].iter().all(|c| c.get("usageMetadata").is_none()
            && c["candidates"][0].get("finishReason").is_none()));
        let last = &chunks[10];
        assert_eq!(
            last["candidates"][0],
            json!({"finishReason": "MAX_TOKENS", "index": 0})
        );
        assert_eq!(last["usageMetadata"]["thoughtsTokenCount"], 8);
        assert_eq!(last["usageMetadata"]["candidatesTokenCount"], 2);
    }

    #[test]
    fn a_thinking_stream_without_words_still_carries_the_signature() {
        let (chunks, finish_at) = stream(json!({"contents": [{"parts": [{"text": "hello"}]}],
            "generationConfig": {"thinkingConfig": {"includeThoughts": true}, "maxOutputTokens": 3}}));
        assert_eq!(finish_at, 9);
        assert_eq!(
            chunks[8]["candidates"][0]["content"]["parts"][0],
            json!({"text": "", "thoughtSignature": signature()})
        );
    }
}
