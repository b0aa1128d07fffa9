//! `POST /v1/chat/completions`: the OpenAI chat-completions protocol, from
//! the shared plan (the rules are in the module `chat`). What is its own:
//!
//! - **Auth.** `Authorization: Bearer <key>` (checked by the auth layer).
//! - **Turns.** Every message is a turn: `system` messages are system turns,
//!   `user` messages user turns, a `tool` message's content is a tool
//!   result; any other role is the assistant's. Content may be a string, an
//!   array of parts (only `{"type":"text","text":..}` parts count) or null
//!   (0 words).
//! - **Usage.** `prompt_tokens`, `completion_tokens` (reasoning included),
//!   `total_tokens`, `prompt_tokens_details.cached_tokens` (the system
//!   messages' tokens) and `completion_tokens_details.reasoning_tokens`.
//! - **Answer.** `chat.completion` with one choice: `content` (the words
//!   joined by spaces, `""` when none are left or on a refusal, `null` with
//!   `tool_calls`), `reasoning_content` when thinking, and `finish_reason`.
//!   Tool calls are `{"id": "call_<hex>", "type": "function", "function":
//!   {"name", "arguments"}}` with `arguments` the compact JSON string.
//! - **Streaming.** Role chunk `{"role":"assistant","content":""}`, then one
//!   chunk per reasoning word (`reasoning_content`), one per content word,
//!   or for each tool call a header delta (`index`, `id`, `type`, `name`,
//!   `arguments: ""`) and its arguments in 3 fragments; then an empty delta
//!   with `finish_reason`. With `stream_options.include_usage`, every chunk
//!   has `"usage": null` and a final chunk with `"choices": []` carries the
//!   usage. Then `[DONE]`. The finish marker is everything from the
//!   `finish_reason` chunk on.

mod render;
mod request;

use std::sync::Arc;

use axum::extract::State;
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use serde_json::Value;

use super::plan::Plan;
use super::{respond, unix_now, ChatRequest, Rendered, Wire};
use crate::sse::Out;
use crate::SimState;
use render::Meta;

pub async fn completions(State(state): State<Arc<SimState>>, body: Bytes) -> Response {
    match ChatRequest::parse(&body) {
        Ok(req) => respond(&state, req, Wire::OpenAi).await,
        Err(e) => e.into_response(),
    }
}

/// The answer and the usage it reports (none for a stream without
/// `include_usage`).
pub(super) fn render(req: &ChatRequest, plan: &Plan, n: u64) -> (Rendered, Option<Value>) {
    let meta = Meta {
        id: format!("chatcmpl-sim-{n}"),
        created: unix_now(),
        model: req.model.clone(),
    };
    if !req.stream {
        return (
            Rendered::Plain(render::completion(&meta, plan)),
            Some(render::usage(&plan.usage)),
        );
    }
    let chunks = render::chunks(&meta, plan, req.include_usage);
    // The finish chunk, and the usage chunk after it.
    let finish_at = chunks.len() - if req.include_usage { 2 } else { 1 };
    let mut events: Vec<Out> = chunks.iter().map(|c| Out::data(c.to_string())).collect();
    events.push(Out::data("[DONE]"));
    let usage = req.include_usage.then(|| render::usage(&plan.usage));
    (Rendered::Stream { events, finish_at }, usage)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::chat::plan::plan;
    use serde_json::json;

    fn render_for(body: Value) -> (Rendered, Option<Value>) {
        match ChatRequest::parse(body.to_string().as_bytes()) {
            Ok(r) => render(&r, &plan(&r), 3),
            Err(e) => panic!("unexpected error {e:?}"),
        }
    }

    fn stream_events(r: Rendered) -> (Vec<Value>, usize) {
        let Rendered::Stream { events, finish_at } = r else {
            panic!("expected a stream")
        };
        let values = events
            .iter()
            .map(|e| serde_json::from_str(&e.data).unwrap_or(Value::Null))
            .collect();
        (values, finish_at)
    }

    #[test]
    fn plain_answers_report_their_usage() {
        let (r, usage) = render_for(json!({"messages": [{"role": "user", "content": "a b"}]}));
        let Rendered::Plain(v) = r else {
            panic!("expected a plain answer")
        };
        assert_eq!(v["id"], "chatcmpl-sim-3");
        assert_eq!(usage.as_ref(), Some(&v["usage"]));
    }

    #[test]
    fn the_finish_marker_starts_at_the_finish_reason_chunk() {
        let body = |usage: bool| {
            json!({"stream": true, "stream_options": {"include_usage": usage},
                   "messages": [{"role": "user", "content": "a b"}]})
        };
        let (r, usage) = render_for(body(false));
        assert_eq!(usage, None, "no usage without include_usage");
        let (events, finish_at) = stream_events(r);
        assert!(events[finish_at]["choices"][0]["finish_reason"].is_string());
        assert!(events[..finish_at]
            .iter()
            .all(|e| e["choices"][0]["finish_reason"].is_null()));
        assert_eq!(events.len(), finish_at + 2, "finish, [DONE]");

        let (r, usage) = render_for(body(true));
        let (events, finish_at) = stream_events(r);
        assert_eq!(events.len(), finish_at + 3, "finish, usage, [DONE]");
        assert_eq!(usage.as_ref(), Some(&events[finish_at + 1]["usage"]));
    }

    #[test]
    fn refusals_tool_results_and_raw_finishes() {
        let (r, _) = render_for(
            json!({"model": "sim-reasoner", "messages": [{"role": "user", "content": "x [[sim:refuse]]"}]}),
        );
        let Rendered::Plain(v) = r else { panic!() };
        let choice = &v["choices"][0];
        assert_eq!(choice["finish_reason"], "content_filter");
        assert_eq!(choice["message"]["content"], "");
        assert_eq!(v["usage"]["completion_tokens"], 8, "the reasoning only");

        let (r, _) = render_for(
            json!({"messages": [{"role": "user", "content": "x [[sim:finish=insufficient_system_resource]]"}]}),
        );
        let Rendered::Plain(v) = r else { panic!() };
        assert_eq!(
            v["choices"][0]["finish_reason"],
            "insufficient_system_resource"
        );
        assert!(v["choices"][0]["message"]["content"]
            .as_str()
            .is_some_and(|c| c.starts_with("Simulated reply to: x.")));
    }

    #[test]
    fn the_bench_stream_is_a_role_chunk_64_deltas_and_the_end() {
        // `make bench`'s streamed test: 64 words, 20 ms apart from the second on.
        let (r, usage) = render_for(json!({"stream": true, "max_tokens": 256,
            "messages": [{"role": "user", "content": "hello from the load generator [[sim:words=64,delta_delay_ms=20]]"}]}));
        assert_eq!(usage, None);
        let (events, finish_at) = stream_events(r);
        assert_eq!(events.len(), 1 + 64 + 1 + 1, "role, deltas, finish, [DONE]");
        assert_eq!(crate::chat::Wire::OpenAi.opening(), 1, "the role chunk");
        assert_eq!(events[0]["choices"][0]["delta"]["role"], "assistant");
        assert_eq!(events[0]["choices"][0]["delta"]["content"], "");
        assert!(events[1..=64]
            .iter()
            .all(|e| e["choices"][0]["delta"]["content"]
                .as_str()
                .is_some_and(|c| !c.is_empty())));
        assert_eq!(finish_at, 65);
        assert_eq!(events[65]["choices"][0]["finish_reason"], "stop");
        assert_eq!(events[66], Value::Null, "[DONE] is not JSON");
    }

    #[test]
    fn parallel_calls_in_a_stream() {
        let (r, _) = render_for(json!({"stream": true,
            "messages": [{"role": "user", "content": "q [[sim:parallel]]"}],
            "tools": [{"type": "function", "function": {"name": "a"}},
                      {"type": "function", "function": {"name": "b"}}]}));
        let (events, finish_at) = stream_events(r);
        assert_eq!(
            events[finish_at]["choices"][0]["finish_reason"],
            "tool_calls"
        );
        let headers: Vec<&Value> = events
            .iter()
            .filter_map(|e| e["choices"][0]["delta"]["tool_calls"][0].get("id"))
            .collect();
        assert_eq!(headers.len(), 2);
        assert_eq!(
            headers[1],
            &json!(format!("call_{:08x}", crate::tokens::fnv1a("q#1") as u32))
        );
    }
}
